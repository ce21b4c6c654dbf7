package core

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// A list is the same as the last only with the very objects at the same
// versions: a replaced, edited, added, removed, duplicated or unversioned
// object makes it differ.
func TestSameObjects(t *testing.T) {
	claim := func(name, rv string) *resourceapi.ResourceClaim {
		c := fx.Claim(name, "gpu", 1)
		c.ResourceVersion = rv
		return c
	}
	a, b, c := claim("a", "1"), claim("b", "1"), claim("c", "1")
	var s sameObjects[*resourceapi.ResourceClaim]
	steps := []struct {
		name string
		list []*resourceapi.ResourceClaim
		edit func()
		want bool
	}{
		{name: "first list", list: []*resourceapi.ResourceClaim{a, b}, want: false},
		{name: "same objects, other order", list: []*resourceapi.ResourceClaim{b, a}, want: true},
		{name: "one replaced by an equal copy", list: []*resourceapi.ResourceClaim{a, claim("b", "1")}, want: false},
		{name: "unchanged since", list: []*resourceapi.ResourceClaim{a, claim("b", "1")}, want: false},
		{name: "one added", list: []*resourceapi.ResourceClaim{a, b, c}, want: false},
		{name: "unchanged", list: []*resourceapi.ResourceClaim{c, b, a}, want: true},
		{name: "one removed", list: []*resourceapi.ResourceClaim{a, b}, want: false},
		{name: "one duplicated", list: []*resourceapi.ResourceClaim{a, a}, want: false},
		{name: "back to a and b", list: []*resourceapi.ResourceClaim{a, b}, want: false},
		{name: "edited in place, new version", list: []*resourceapi.ResourceClaim{a, b}, edit: func() { b.ResourceVersion = "2" }, want: false},
		{name: "no version", list: []*resourceapi.ResourceClaim{a, b}, edit: func() { b.ResourceVersion = "" }, want: false},
		{name: "no version, again", list: []*resourceapi.ResourceClaim{a, b}, want: false},
	}
	for _, st := range steps {
		if st.edit != nil {
			st.edit()
		}
		if got := s.same(st.list); got != st.want {
			t.Errorf("%s: same = %v, want %v", st.name, got, st.want)
		}
	}
}

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
