package devicefull

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// A slice's device IDs are made once and dropped with the slice.
func TestSliceDeviceIDsKeepOnlyCurrentSlices(t *testing.T) {
	var ids SliceCache
	a, b := fx.GPUSlice("a", 2), fx.GPUSlice("b", 3)
	first := ids.of([]*resourceapi.ResourceSlice{a, b})
	if len(first[0].once) != 2 || len(first[1].once) != 3 {
		t.Fatalf("device IDs %v, want 2 and 3", first)
	}
	replaced := fx.GPUSlice("a", 4)
	second := ids.of([]*resourceapi.ResourceSlice{replaced, b})
	if len(second[0].once) != 4 || &second[1].once[0] != &first[1].once[0] {
		t.Fatalf("replaced slice not read anew or kept slice read again: %v", second)
	}
	if len(ids.last) != 2 || ids.last[a].once != nil {
		t.Fatalf("cache holds %d slices (the replaced one: %v), want the 2 current", len(ids.last), ids.last[a].once != nil)
	}
}
