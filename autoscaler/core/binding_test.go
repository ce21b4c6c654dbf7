package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// While the scheduler binds a scale-up's pods, its PreBind creates each
// pod's extended-resource claim, allocates and reserves it, and only then
// records it in the pod's status. A loop that sees pods in between must
// not ask for more nodes: here 10 existing 8-GPU nodes hold 20 bound pods,
// 20 pods whose claims are allocated (status not yet patched), 10 whose
// claims are created but not yet allocated, and 30 pending pods without a
// claim, which fit in the 40 devices still free. The pods being bound are
// the oldest, so the scheduler's queue order tries them first.
func TestNoScaleUpWhilePodsAreBeingBound(t *testing.T) {
	var objs []k8sruntime.Object
	created := 0
	pod := func(name string) *v1.Pod {
		p := fx.Pod(name, 100, fx.GPUs(fx.GPUResource, 1))
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train", UID: "rs-train", Controller: ptr.To(true)}}
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
		p.CreationTimestamp = metav1.NewTime(fx.Epoch.Add(time.Duration(created) * time.Second))
		created++
		return p
	}
	for n := 0; n < 10; n++ {
		node := fmt.Sprintf("gpu-node-%d", n)
		objs = append(objs, fx.Node(node, 64, 256, nil), fx.GPUSlice(node, 8))
		for d := 0; d < 5; d++ {
			// Names sort the pods being bound last, so the estimate's
			// largest-first order meets a pending pod first.
			p := pod(fmt.Sprintf("z-%s-%d", node, d))
			claim := fx.ExtendedResourceClaim(p, "gpu.example.com", fx.Driver, node, 1, fmt.Sprintf("gpu-%d", d))
			switch {
			case d < 2: // bound
				p.Spec.NodeName = node
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
				p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: claim.Name,
					RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "main",
						ResourceName: string(fx.GPUResource), RequestName: claim.Spec.Devices.Requests[0].Name}}}
			case d < 4: // claim allocated and reserved, pod status not yet patched
			default: // claim created, not yet allocated
				claim.Status = resourceapi.ResourceClaimStatus{}
			}
			objs = append(objs, claim, p)
		}
	}
	for i := 0; i < 30; i++ {
		objs = append(objs, pod(fmt.Sprintf("a-train-%d", i)))
	}
	// setup's group expects no IncreaseSize: gomock fails the test on one.
	a, provider, _, recorder := setup(t, objs...)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	res, err := a.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.ScaleUp != nil {
		t.Fatalf("scale-up %s +%d for %d pods; the 30 pending pods fit on the existing nodes", res.ScaleUp.NodeGroup, res.ScaleUp.NewNodes, len(res.ScaleUp.Pods))
	}
	if res.Unschedulable != 30 || len(res.NoScaleUp) != 0 {
		t.Errorf("unschedulable = %d, noScaleUp = %v; want the 30 pods without a claim, all fitting existing nodes", res.Unschedulable, res.NoScaleUp)
	}
	for _, e := range events(recorder) {
		t.Errorf("unexpected event %q", e)
	}
}
