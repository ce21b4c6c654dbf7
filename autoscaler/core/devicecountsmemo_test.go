package core

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// The device counts are counted again when a claim or slice changed
// since the last loop, and only then reused.
func TestDeviceCountsMemoSeesChanges(t *testing.T) {
	versioned := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c.ResourceVersion = "1"
		return c
	}
	slices := []*resourceapi.ResourceSlice{fx.GPUSlice("node-0", 4)}
	slices[0].ResourceVersion = "1"
	one := versioned(fx.Allocated("one", "gpu.example.com", fx.Driver, "node-0", "gpu-0"))
	two := versioned(fx.Allocated("two", "gpu.example.com", fx.Driver, "node-0", "gpu-1", "gpu-2"))
	var m deviceCountsMemo
	check := func(step string, claims []*resourceapi.ResourceClaim, want float64) {
		t.Helper()
		inUse, published := m.counts(slices, claims)
		fresh, freshPublished := deviceCounts(slices, claims)
		if inUse["gpu.example.com"] != want || fmt.Sprint(inUse) != fmt.Sprint(fresh) || fmt.Sprint(published) != fmt.Sprint(freshPublished) {
			t.Errorf("%s: in use %v, published %v; want %v devices as counted afresh: %v, %v", step, inUse, published, want, fresh, freshPublished)
		}
	}
	check("first loop", []*resourceapi.ResourceClaim{one}, 1)
	check("same claim", []*resourceapi.ResourceClaim{one}, 1)
	check("claim added", []*resourceapi.ResourceClaim{one, two}, 3)
	deallocated := two.DeepCopy()
	deallocated.ResourceVersion, deallocated.Status.Allocation = "2", nil
	check("claim replaced, deallocated", []*resourceapi.ResourceClaim{one, deallocated}, 1)
	check("unchanged", []*resourceapi.ResourceClaim{deallocated, one}, 1)
	smaller := fx.GPUSlice("node-0", 2)
	smaller.ResourceVersion = "2"
	slices = []*resourceapi.ResourceSlice{smaller}
	inUse, published := m.counts(slices, []*resourceapi.ResourceClaim{deallocated, one})
	if published[fx.Driver] != 2 || inUse["gpu.example.com"] != 1 {
		t.Errorf("slice replaced: in use %v, published %v; want 2 published, 1 in use", inUse, published)
	}
}
