package core

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
)

// BenchmarkRunOnceOwnClaims is the Cluster Autoscaler's DRA scale-up
// shape: 500 8-GPU nodes full of pods that each hold an allocated claim
// of their own, and 4,000 pending pods each referencing a pre-created
// one-GPU claim of its own (as job operators write them), or one the
// resourceclaim controller generated from a template (owned by the pod,
// named in its status). They need 4,000 / 8 = 500 new nodes. The same
// cluster with pods asking example.com/gpu instead is what claim pods
// should cost. At CA's size and at ten times it.
func BenchmarkRunOnceOwnClaims(b *testing.B) {
	for _, nodes := range []int{500, 5000} {
		runOnceOwnClaims(b, nodes)
	}
}

func runOnceOwnClaims(b *testing.B, nodes int) {
	pending, wantNodes := nodes*8, nodes
	variants := []struct {
		name string
		objs func() []k8sruntime.Object
	}{
		{"named-claims", func() []k8sruntime.Object { return ownClaimObjects(nodes, pending, false) }},
		{"generated-claims", func() []k8sruntime.Object { return ownClaimObjects(nodes, pending, true) }},
		{"extended-resource", func() []k8sruntime.Object { return fleetObjects(fleetShape{gpuNodes: nodes, pending: pending}) }},
	}
	for _, v := range variants {
		caScaleUpRow(b, fmt.Sprintf("%s-%d-nodes-%d-pending", v.name, nodes, pending), pending, wantNodes, v.objs,
			func(b *testing.B) (cloudprovider.Provider, *[]int) { return benchProvider(b, 2*nodes) })
	}
}

// ownClaimObjects builds the nodes, their running pods with allocated
// claims, and the pending pods with fresh claims of their own.
func ownClaimObjects(nodes, pending int, generated bool) []k8sruntime.Object {
	objs := []k8sruntime.Object{fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch),
		fx.ClaimTemplate("one-gpu", "gpu.example.com", 1)}
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("gpu-node-%d", n)
		objs = append(objs, fx.Node(node, 64, 256, nil), fx.GPUSlice(node, 8))
		for d := 0; d < 8; d++ {
			pod := fx.WithClaim(fx.Pod(fmt.Sprintf("%s-job-%d", node, d), 100, nil), "gpu", fmt.Sprintf("%s-job-%d-gpu", node, d))
			pod.Spec.NodeName = node
			pod.Status.Phase = v1.PodRunning
			pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
			claim := fx.Claim(*pod.Spec.ResourceClaims[0].ResourceClaimName, "gpu.example.com", 1)
			claim.Finalizers = []string{resourceapi.Finalizer}
			claim.Status = resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "devices", Driver: fx.Driver, Pool: node, Device: fmt.Sprintf("gpu-%d", d)}}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
			}
			objs = append(objs, pod, claim)
		}
	}
	for i := 0; i < pending; i++ {
		name := fmt.Sprintf("job-%d", i)
		var pod *v1.Pod
		claim := fx.Claim(name+"-gpu", "gpu.example.com", 1)
		if generated {
			pod = fx.WithTemplateClaim(fx.Pod(name, 100, nil), "gpu", "one-gpu")
			pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
			claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
		} else {
			pod = fx.WithClaim(fx.Pod(name, 100, nil), "gpu", claim.Name)
		}
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
		objs = append(objs, pod, claim)
	}
	return objs
}
