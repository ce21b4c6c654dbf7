package snapshot

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// A replica added with the source's precomputed pod info counts exactly
// as if it were added on its own, and a revert takes it back.
func TestAddPodLikeCountsLikeAddPod(t *testing.T) {
	bound := func(name, node string) *v1.Pod {
		p := fx.Pod(name, 1500, nil)
		p.Spec.NodeName = node
		return p
	}
	cases := []struct {
		name string
		like string // name of the pod to copy from; unknown: computed anew
	}{
		{name: "copied from a placed pod", like: "src"},
		{name: "unknown source", like: "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, want := New(), New()
			for _, snap := range []*Snapshot{s, want} {
				for _, n := range []string{"a", "b"} {
					if err := snap.AddNode(fx.Node(n, 8, 16, nil)); err != nil {
						t.Fatal(err)
					}
				}
				if err := snap.AddPod(bound("src", "a")); err != nil {
					t.Fatal(err)
				}
			}
			if err := want.AddPod(bound("copy", "b")); err != nil {
				t.Fatal(err)
			}
			before := dump(t, s)
			s.Fork()
			if err := s.AddPodLike(bound("copy", "b"), types.UID("pod-"+tc.like)); err != nil {
				t.Fatal(err)
			}
			got, exp := s.NodeInfo("b"), want.NodeInfo("b")
			if got.Requested.MilliCPU != exp.Requested.MilliCPU || got.NonZeroRequested.Memory != exp.NonZeroRequested.Memory || len(got.Pods) != 1 {
				t.Errorf("node b after AddPodLike: requested %+v (non-zero %+v), %d pods; want %+v (%+v), 1 pod",
					got.Requested, got.NonZeroRequested, len(got.Pods), exp.Requested, exp.NonZeroRequested)
			}
			if g := s.NodeInfo("b").Pods[0].GetPod().Name; g != "copy" {
				t.Errorf("node b holds %s, want the replica itself", g)
			}
			s.Revert()
			if after := dump(t, s); after != before {
				t.Errorf("revert did not restore the snapshot:\n%s\nwant\n%s", after, before)
			}
		})
	}
}
