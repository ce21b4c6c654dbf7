package placement

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// TestRemoveFreesDevices fills a node with one pod, removes it, checks that
// its devices are free for another pod and that the removed pod can be
// placed again with no stale claim left behind.
func TestRemoveFreesDevices(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *Engine)
		pod   func(name string) *v1.Pod
		// user is the pod's user claim name, when it has one that outlives it.
		user func(pod *v1.Pod) string
	}{
		{
			name: "extended resource only",
			pod:  func(name string) *v1.Pod { return fx.Pod(name, 100, fx.GPUs(fx.GPUResource, 4)) },
		},
		{
			name:  "template claim and extended resource",
			setup: func(h *Engine) { h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("two", gpuClass, 2)) },
			pod: func(name string) *v1.Pod {
				return fx.WithTemplateClaim(fx.Pod(name, 100, fx.GPUs(fx.GPUResource, 2)), "gpus", "two")
			},
			user: func(pod *v1.Pod) string {
				name, _, _ := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[0])
				return *name
			},
		},
		{
			name:  "template claim only",
			setup: func(h *Engine) { h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("four", gpuClass, 4)) },
			pod:   func(name string) *v1.Pod { return fx.WithTemplateClaim(fx.Pod(name, 100, nil), "gpus", "four") },
			user: func(pod *v1.Pod) string {
				name, _, _ := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[0])
				return *name
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 1, 4)
			if tc.setup != nil {
				tc.setup(h)
			}
			first := mustPlace(t, h, tc.pod("first"), "node-0")
			if got := len(allocatedDevices(h)); got != 4 {
				t.Fatalf("allocated devices = %d, want 4", got)
			}
			if _, ferr := h.Place(tc.pod("second"), "node-0"); ferr == nil {
				t.Fatal("second pod fits a full node")
			}
			claimsBefore := len(h.snap.AllResourceClaims())

			pending, err := h.Remove(first.UID)
			if err != nil {
				t.Fatal(err)
			}
			if pending.Spec.NodeName != "" || pending.Status.ExtendedResourceClaimStatus != nil {
				t.Errorf("removed pod still bound: nodeName %q, status %+v", pending.Spec.NodeName, pending.Status.ExtendedResourceClaimStatus)
			}
			if got := allocatedDevices(h); len(got) != 0 {
				t.Errorf("devices still taken after Remove: %v", got)
			}
			if got := podsOn(h, "node-0"); len(got) != 0 {
				t.Errorf("node still runs %v", got)
			}
			if _, _, ok := h.snap.Pod(first.UID); ok {
				t.Error("snapshot still knows the removed pod")
			}
			if xr := extendedClaim(h, first); xr != nil {
				t.Errorf("extended-resource claim %s survives its pod", xr.Name)
			}
			if tc.user != nil {
				c := h.snap.ResourceClaim("default", tc.user(first))
				if c == nil || c.Status.Allocation != nil || len(c.Status.ReservedFor) != 0 {
					t.Errorf("template claim after Remove: %+v, want it kept, deallocated and unreserved", c)
				}
			}

			// Place the same pod again, from the returned object and again from the original.
			for round, pod := range []*v1.Pod{pending, tc.pod("first")} {
				again := mustPlace(t, h, pod, "node-0")
				if got := len(allocatedDevices(h)); got != 4 {
					t.Errorf("round %d: allocated devices = %d, want 4", round, got)
				}
				if got := len(h.snap.AllResourceClaims()); got != claimsBefore {
					t.Errorf("round %d: %d claims, want %d (no stale or duplicate claim)", round, got, claimsBefore)
				}
				if n := countOwned(h, again); n != len(again.Spec.ResourceClaims)+boolInt(again.Status.ExtendedResourceClaimStatus != nil) {
					t.Errorf("round %d: pod owns %d claims", round, n)
				}
				if _, err := h.Remove(again.UID); err != nil {
					t.Fatal(err)
				}
			}

			// The freed devices go to another pod.
			mustPlace(t, h, tc.pod("second"), "node-0")
			if got := podsOn(h, "node-0"); !slices.Equal(got, []string{"second"}) {
				t.Errorf("node runs %v, want [second]", got)
			}
		})
	}
}

// TestRemoveRunningPod removes a pod that was added as running, with an
// extended-resource claim found by its annotation and owner.
func TestRemoveRunningPod(t *testing.T) {
	h := cluster(t, 1, 8)
	running := fx.Pod("running", 100, fx.GPUs(fx.GPUResource, 6))
	running.Spec.NodeName = "node-0"
	if err := h.snap.AddPod(running); err != nil {
		t.Fatal(err)
	}
	h.snap.SetResourceClaim(fx.ExtendedResourceClaim(running, gpuClass, fx.Driver, "node-0", 1,
		"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"))
	if _, ferr := h.Place(fx.Pod("p", 100, fx.GPUs(fx.GPUResource, 3)), "node-0"); ferr == nil {
		t.Fatal("3 devices fit where 2 are free")
	}
	if _, err := h.Remove(running.UID); err != nil {
		t.Fatal(err)
	}
	if n := len(h.snap.AllResourceClaims()); n != 0 {
		t.Errorf("%d claims left, want the running pod's claim deleted", n)
	}
	mustPlace(t, h, fx.Pod("p", 100, fx.GPUs(fx.GPUResource, 8)), "node-0")
}

// TestRemoveSharedClaim: a pre-existing claim shared by two pods stays
// allocated until the last of them is removed.
func TestRemoveSharedClaim(t *testing.T) {
	h := cluster(t, 1, 4)
	h.snap.SetResourceClaim(fx.Claim("shared", gpuClass, 2))
	a := mustPlace(t, h, fx.WithClaim(fx.Pod("a", 100, nil), "gpus", "shared"), "node-0")
	b := mustPlace(t, h, fx.WithClaim(fx.Pod("b", 100, nil), "gpus", "shared"), "node-0")
	claim := func() *resourceapi.ResourceClaim { return h.snap.ResourceClaim("default", "shared") }
	if got := len(claim().Status.ReservedFor); got != 2 || len(allocatedDevices(h)) != 2 {
		t.Fatalf("shared claim reserved for %d pods, %d devices taken; want 2, 2", got, len(allocatedDevices(h)))
	}
	if _, err := h.Remove(a.UID); err != nil {
		t.Fatal(err)
	}
	if c := claim(); len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != b.UID || len(deviceNames(c)) != 2 {
		t.Errorf("after removing a: reservedFor %+v, devices %v; want b, 2 devices", c.Status.ReservedFor, deviceNames(c))
	}
	if _, err := h.Remove(b.UID); err != nil {
		t.Fatal(err)
	}
	if c := claim(); c.Status.Allocation != nil || len(c.Status.ReservedFor) != 0 || len(allocatedDevices(h)) != 0 {
		t.Errorf("after removing both: %+v, want deallocated", c.Status)
	}
	mustPlace(t, h, fx.WithClaim(fx.Pod("a", 100, nil), "gpus", "shared"), "node-0")
}

func countOwned(h *Engine, pod *v1.Pod) int {
	n := 0
	for _, c := range h.snap.AllResourceClaims() {
		if ownedBy(c, pod) {
			n++
		}
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
