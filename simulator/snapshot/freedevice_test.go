package snapshot

import (
	"testing"

	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// HasFreeDevice follows the claims allocated, the slices added and
// removed (forks reverted included), and counts a device that may be
// allocated several times as free.
func TestHasFreeDevice(t *testing.T) {
	s := New()
	if err := s.AddNode(fx.Node("node-0", 8, 32, nil)); err != nil {
		t.Fatal(err)
	}
	if s.HasFreeDevice("node-0") {
		t.Error("a node without slices has a free device")
	}
	if err := s.AddResourceSlice(fx.GPUSlice("node-0", 2)); err != nil {
		t.Fatal(err)
	}
	if !s.HasFreeDevice("node-0") {
		t.Error("two unallocated GPUs: no free device")
	}
	s.SetResourceClaim(allocatedClaim("one", "gpu-0"))
	if !s.HasFreeDevice("node-0") {
		t.Error("gpu-1 is free, HasFreeDevice says none")
	}
	s.SetResourceClaim(allocatedClaim("two", "gpu-1"))
	if s.HasFreeDevice("node-0") {
		t.Error("both GPUs allocated, HasFreeDevice says one is free")
	}

	// A second slice added in a fork, and gone with the fork.
	s.Fork()
	more := fx.DeviceSlice("node-0", fx.Driver, 1, "extra")
	more.Spec.Pool.Name = "node-0-extra"
	if err := s.AddResourceSlice(more); err != nil {
		t.Fatal(err)
	}
	if !s.HasFreeDevice("node-0") {
		t.Error("the fork's new slice has a free device, HasFreeDevice says none")
	}
	s.Revert()
	if s.HasFreeDevice("node-0") {
		t.Error("after Revert the new slice is gone, but HasFreeDevice still sees a free device")
	}

	shared := fx.DeviceSlice("node-0", fx.Driver, 1, "shared")
	shared.Spec.Pool.Name = "node-0-shared"
	shared.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	if err := s.AddResourceSlice(shared); err != nil {
		t.Fatal(err)
	}
	s.SetResourceClaim(allocatedClaim("on-shared", "shared-0"))
	if !s.HasFreeDevice("node-0") {
		t.Error("a device that may be allocated several times counts as free")
	}
}
