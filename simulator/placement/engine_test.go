package placement

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// cluster builds a snapshot with DRA nodes (devices each), the gpu class
// mapping example.com/gpu, and returns a placement engine over it.
func cluster(t testing.TB, nodes, devices int) *Engine {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		if err := snap.AddNode(fx.Node(name, 64, 256, nil)); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(name, devices)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPlaceExtendedResourcePodsTakeDevices(t *testing.T) {
	h := cluster(t, 2, 8)
	perNode := map[string]int{}
	for i := 0; i < 17; i++ {
		pod := fx.Pod(fmt.Sprintf("p%d", i), 100, fx.GPUs(fx.GPUResource, 1))
		node, placed, ferr := h.PlaceOnAnyNode(pod, h.snap.NodeNames())
		if i == 16 {
			if ferr == nil {
				t.Fatalf("pod 17 placed on %s, want no room: 16 devices are taken", node)
			}
			t.Logf("17th pod: %v", ferr)
			continue
		}
		if ferr != nil {
			t.Fatalf("pod %d: %v", i, ferr)
		}
		perNode[node]++
		st := placed.Status.ExtendedResourceClaimStatus
		if st == nil || len(st.RequestMappings) != 1 || st.RequestMappings[0].RequestName != "container-0-request-1" {
			t.Fatalf("pod %d: extendedResourceClaimStatus = %+v", i, st)
		}
		claim := h.snap.ResourceClaim("default", st.ResourceClaimName)
		if claim == nil || claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("pod %d: claim %+v", i, claim)
		}
		if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" || !ownedBy(claim, placed) {
			t.Fatalf("pod %d: claim not annotated/owned: %+v", i, claim.ObjectMeta)
		}
	}
	if perNode["node-0"] != 8 || perNode["node-1"] != 8 {
		t.Fatalf("placements per node = %v, want 8 and 8", perNode)
	}
	if got := h.snap.AllocatedDeviceIDs().Len(); got != 16 {
		t.Fatalf("allocated devices = %d, want 16", got)
	}
	_ = v1.ResourceCPU
}
