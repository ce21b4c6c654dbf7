package core

import (
	"fmt"
	"testing"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	fx "draxr.dev/draxr/simulator/fixtures"
)

// BenchmarkScaleDownDRA is the Cluster Autoscaler's DRA scale-down
// shape (its BenchmarkRunOnceScaleDownDRA): nodes of 10 devices, each
// running 4 pods that hold one device through a claim of their own,
// pre-created (named) or generated from a template (owned by the pod,
// named in its status), so 60% of the nodes can go. One loop's scale-down
// decision, from synced informers to a verdict for every node, asserting
// how many are removable (CA's bound on unneeded nodes included).
func BenchmarkScaleDownDRA(b *testing.B) {
	for _, nodes := range []int{800, 8000} {
		for _, generated := range []bool{false, true} {
			kind := "named-claims"
			if generated {
				kind = "generated-claims"
			}
			// CA's scenario raises both parallelisms to 2,000, so a loop
			// looks for up to 4,000 unneeded nodes (CA's limit, twice the
			// parallelism on a first loop), all of them at 800 nodes.
			caScaleDownRow(b, fmt.Sprintf("%s-%d-nodes", kind, nodes), nodes, generated)
		}
	}
}

// scaleDownClaimObjects builds BenchmarkScaleDownDRA's cluster.
func scaleDownClaimObjects(nodes int, generated bool) []k8sruntime.Object {
	objs := []k8sruntime.Object{fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch),
		fx.ClaimTemplate("one-gpu", "gpu.example.com", 1)}
	for n := range nodes {
		node := fmt.Sprintf("gpu-node-%05d", n)
		objs = append(objs, fx.Node(node, 64, 256, nil), fx.GPUSlice(node, 10))
		for d := range 4 {
			name := fmt.Sprintf("%s-job-%d", node, d)
			pod := fx.Pod(name, 100, nil)
			claim := fx.Claim(name+"-gpu", "gpu.example.com", 1)
			if generated {
				fx.WithTemplateClaim(pod, "gpu", "one-gpu")
				pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
				claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
			} else {
				fx.WithClaim(pod, "gpu", claim.Name)
			}
			// Safe to evict: a pod with no controller would block its node.
			pod.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
			pod.Spec.NodeName = node
			pod.Status.Phase = v1.PodRunning
			pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
			claim.Finalizers = []string{resourceapi.Finalizer}
			claim.Status = resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "devices", Driver: fx.Driver, Pool: node, Device: fmt.Sprintf("gpu-%d", d)}}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
			}
			objs = append(objs, pod, claim)
		}
	}
	return objs
}

// scaleDownBenchProvider is one 10-device DRA group holding every node.
func scaleDownBenchProvider(b *testing.B, nodes int) cloudprovider.Provider {
	ctrl := gomock.NewController(b)
	group := mocks.NewMockNodeGroup(ctrl)
	expectFlagOptions(group)
	group.EXPECT().Id().Return("gpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(2 * nodes).AnyTimes()
	group.EXPECT().TargetSize().Return(nodes, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(fx.Node("template", 64, 256, nil), []*resourceapi.ResourceSlice{fx.GPUSlice("template", 10)}, nil).AnyTimes()
	group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(group, nil).AnyTimes()
	return provider
}
