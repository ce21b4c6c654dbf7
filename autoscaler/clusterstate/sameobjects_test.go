package clusterstate

import (
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
	var s SameObjects[*resourceapi.ResourceClaim]
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
		if got := s.Same(st.list); got != st.want {
			t.Errorf("%s: same = %v, want %v", st.name, got, st.want)
		}
	}
}
