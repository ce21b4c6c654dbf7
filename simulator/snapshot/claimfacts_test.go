package snapshot

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// What a build keeps of a claim stands for that object only: a claim
// replaced by a changed one, or edited in place under a new
// resourceVersion, or without one, is read again; its devices and its
// owning pod are the new ones in the next build.
func TestClaimFactsFollowClaimObjects(t *testing.T) {
	infos := NewPodInfos()
	claim := func(owner, rv string, device string) *resourceapi.ResourceClaim {
		p := fx.Pod(owner, 100, nil)
		p.UID = types.UID("uid-" + owner)
		c := fx.ExtendedResourceClaim(p, "gpu", "gpu.example.com", "pool", 0, device)
		c.Name, c.ResourceVersion = "claim", rv
		return c
	}
	build := func(c *resourceapi.ResourceClaim) *Snapshot {
		t.Helper()
		s := New()
		if err := s.AddBoundPods([]*v1.Pod{}, infos); err != nil {
			t.Fatal(err)
		}
		s.SetResourceClaims([]*resourceapi.ResourceClaim{c}, infos)
		return s
	}
	check := func(step string, s *Snapshot, device, owner string) {
		t.Helper()
		ids := s.AllocatedDeviceIDs()
		if want := structured.MakeDeviceID("gpu.example.com", "pool", device); len(ids) != 1 || !ids.Has(want) {
			t.Errorf("%s: allocated devices %v, want only %s", step, ids.UnsortedList(), device)
		}
		if got := s.ExtendedResourceClaimOf(types.UID("uid-" + owner)); got == nil {
			t.Errorf("%s: no extended-resource claim of pod %s", step, owner)
		}
	}
	first := claim("a", "1", "gpu-0")
	check("first build", build(first), "gpu-0", "a")
	check("same object again", build(first), "gpu-0", "a")
	check("replaced by a changed claim", build(claim("b", "2", "gpu-1")), "gpu-1", "b")
	edited := claim("c", "3", "gpu-2")
	check("a new object", build(edited), "gpu-2", "c")
	edited.ResourceVersion = "4"
	edited.Status.Allocation.Devices.Results[0].Device = "gpu-3"
	edited.OwnerReferences[0].UID = "uid-d"
	check("edited in place under a new version", build(edited), "gpu-3", "d")
	unversioned := claim("e", "", "gpu-4")
	check("no version", build(unversioned), "gpu-4", "e")
	unversioned.Status.Allocation.Devices.Results[0].Device = "gpu-5"
	check("no version, edited", build(unversioned), "gpu-5", "e")
}
