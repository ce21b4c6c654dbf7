package placement

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// sharedGPUSlice is one GPU that allows multiple allocations, each taking
// a share of its 80Gi memory (DRAConsumableCapacity).
func sharedGPUSlice(node string) *resourceapi.ResourceSlice { return fx.SharedGPUSlice(node) }

// Shares of one device replicate with share IDs of their own, and the
// copied node is exactly as full as the source.
func TestReplicateConsumableCapacity(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, "", fx.Epoch))
	addNode(t, snap, "node-0", nil, sharedGPUSlice("node-0"))
	addNode(t, snap, "node-1", nil, sharedGPUSlice("node-1"))
	h := newEngine(t, snap)
	tmpl := fx.ClaimTemplate("share", gpuClass, 1)
	tmpl.Spec.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
		Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")},
	}
	snap.SetResourceClaimTemplate(tmpl)
	pod := func(i int) *v1.Pod {
		return fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("p%d", i), 100, nil), "gpu", "share")
	}

	var src, run []*v1.Pod
	for i := 0; i < 4; i++ { // 4 x 20Gi of 80Gi
		src = append(src, mustPlace(t, h, pod(i), "node-0"))
		run = append(run, pod(i+100))
	}
	if _, ferr := h.Place(pod(50), "node-0"); ferr == nil {
		t.Fatal("a fifth 20Gi share fits on an 80Gi device")
	}
	if err := h.Replicate("node-0", src, "node-1", run); err != nil {
		t.Fatalf("replicate shares: %v", err)
	}
	shareIDs := map[string]string{}
	for _, p := range append(append([]*v1.Pod{}, src...), run...) {
		placed, _, ok := snap.Pod(p.UID)
		if !ok {
			t.Fatalf("pod %s not placed", p.Name)
		}
		for _, c := range h.ClaimsOf(placed) {
			for _, r := range c.Status.Allocation.Devices.Results {
				if r.ShareID == nil {
					t.Fatalf("pod %s: shared device allocated without a share ID", p.Name)
				}
				if other, dup := shareIDs[string(*r.ShareID)]; dup {
					t.Errorf("share ID %s given to both %s and %s", *r.ShareID, other, p.Name)
				}
				shareIDs[string(*r.ShareID)] = p.Name
			}
		}
	}
	if len(shareIDs) != 8 {
		t.Errorf("%d share IDs, want 8", len(shareIDs))
	}
	if _, ferr := h.Place(pod(60), "node-1"); ferr == nil {
		t.Error("a fifth share fits on the replicated node: its capacity was not taken")
	}
}
