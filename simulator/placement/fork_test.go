package placement

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// state renders everything a user of the snapshot can observe after
// placements: pods per node (in the node's order), requested resources,
// the lister's view, taken devices and every claim with its allocation and
// reservations. Two equal states print the same.
func state(t *testing.T, h *Engine) string {
	t.Helper()
	var b strings.Builder
	listed, err := h.snap.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != h.snap.NodeCount() {
		t.Errorf("lister has %d nodes, snapshot %d", len(listed), h.snap.NodeCount())
	}
	for i, name := range h.snap.NodeNames() {
		ni := h.snap.NodeInfo(name)
		if i < len(listed) && listed[i] != ni {
			t.Errorf("lister returns a stale NodeInfo for %s", name)
		}
		if got, _ := h.snap.NodeInfos().Get(name); got != ni {
			t.Errorf("lister Get returns a stale NodeInfo for %s", name)
		}
		r := ni.Requested
		fmt.Fprintf(&b, "node %s: pods %v; requested cpu=%d mem=%d scalar=%v; nonzero cpu=%d mem=%d; slices %d\n",
			name, podsOn(h, name), r.MilliCPU, r.Memory, r.ScalarResources,
			ni.NonZeroRequested.MilliCPU, ni.NonZeroRequested.Memory, len(h.snap.SlicesForNode(name)))
		for _, p := range ni.Pods {
			pod, node, ok := h.snap.Pod(p.GetPod().UID)
			if !ok || node != name || pod != p.GetPod() {
				t.Errorf("pod %s on node %s: snapshot index says %q, %v", p.GetPod().Name, name, node, ok)
			}
		}
	}
	fmt.Fprintf(&b, "devices %v\n", allocatedDevices(h))
	for _, c := range h.snap.AllResourceClaims() {
		var reserved []string
		for _, r := range c.Status.ReservedFor {
			reserved = append(reserved, r.Name)
		}
		fmt.Fprintf(&b, "claim %s/%s: devices %v reservedFor %v\n", c.Namespace, c.Name, deviceNames(c), reserved)
	}
	classes, _ := h.snap.Classes().List()
	for _, c := range classes {
		fmt.Fprintf(&b, "class %s: %v\n", c.Name, h.snap.Classes().ResourceNames(c.Name))
	}
	return b.String()
}

func diffStates(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			out = append(out, fmt.Sprintf("  got:  %s\n  want: %s", gl, wl))
		}
	}
	return strings.Join(out, "\n")
}

// forkWorld is two nodes of 4 devices with two pods placed on node-0 before
// any fork: "a" (one GPU) and "b" (a template claim of one GPU plus one GPU).
func forkWorld(t *testing.T) *Engine {
	h := cluster(t, 2, 4)
	h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("one", gpuClass, 1))
	mustPlace(t, h, fx.Pod("a", 100, fx.GPUs(fx.GPUResource, 1)), "node-0")
	mustPlace(t, h, fx.WithTemplateClaim(fx.Pod("b", 200, fx.GPUs(fx.GPUResource, 1)), "gpu", "one"), "node-0")
	return h
}

func gpuPod(name string, n int64) *v1.Pod { return fx.Pod(name, 100, fx.GPUs(fx.GPUResource, n)) }

func place(t *testing.T, h *Engine, pod *v1.Pod, node string) { mustPlace(t, h, pod, node) }

func remove(t *testing.T, h *Engine, name string) {
	t.Helper()
	if _, err := h.Remove(fx.Pod(name, 0, nil).UID); err != nil {
		t.Fatal(err)
	}
}

// TestForkRevertCommit changes the snapshot inside forks and checks that
// Revert restores exactly the state of the matching Fork, and that Commit
// keeps changes until an enclosing Revert.
func TestForkRevertCommit(t *testing.T) {
	tests := []struct {
		name string
		// run changes h and returns the states it expects to see at the
		// end, checked in order by the test: each want is compared to
		// the state captured by the closure at that point.
		run func(t *testing.T, h *Engine, check func(want string))
	}{
		{
			name: "placements reverted",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				place(t, h, gpuPod("x", 1), "node-0")
				place(t, h, gpuPod("y", 3), "node-1")
				place(t, h, fx.WithTemplateClaim(fx.Pod("z", 100, nil), "gpu", "one"), "node-1")
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "removal reverted",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				remove(t, h, "a")
				remove(t, h, "b")
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "placement and removal on one node reverted",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				place(t, h, gpuPod("x", 1), "node-0")
				remove(t, h, "a")
				place(t, h, gpuPod("y", 1), "node-0")
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "removal and placement again reverted",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				remove(t, h, "b")
				place(t, h, fx.WithTemplateClaim(fx.Pod("b", 200, fx.GPUs(fx.GPUResource, 1)), "gpu", "one"), "node-1")
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "node added and removed in a fork",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				addNode(t, h.snap, "node-2", nil, fx.GPUSlice("node-2", 4))
				place(t, h, gpuPod("x", 4), "node-2")
				if err := h.snap.RemoveNode("node-0"); err != nil {
					t.Fatal(err)
				}
				h.snap.DeleteDeviceClass(gpuClass)
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "nested forks",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				place(t, h, gpuPod("x", 1), "node-0")
				outer := state(t, h)
				h.snap.Fork()
				remove(t, h, "a")
				remove(t, h, "x")
				place(t, h, gpuPod("y", 4), "node-1")
				place(t, h, gpuPod("z", 2), "node-0")
				h.snap.Revert()
				check(outer)
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "commit keeps inner changes; outer revert undoes them",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				h.snap.Fork()
				place(t, h, gpuPod("x", 1), "node-1")
				h.snap.Fork()
				remove(t, h, "a")
				place(t, h, gpuPod("y", 2), "node-0")
				inner := state(t, h)
				h.snap.Commit()
				if h.snap.ForkDepth() != 1 {
					t.Errorf("fork depth after Commit = %d, want 1", h.snap.ForkDepth())
				}
				check(inner)
				h.snap.Revert()
				check(base)
			},
		},
		{
			name: "commit of the outermost fork is final",
			run: func(t *testing.T, h *Engine, check func(string)) {
				h.snap.Fork()
				remove(t, h, "a")
				place(t, h, gpuPod("x", 3), "node-1")
				kept := state(t, h)
				h.snap.Commit()
				h.snap.Revert() // no fork open: no-op
				check(kept)
				h.snap.Fork()
				place(t, h, gpuPod("y", 1), "node-1")
				h.snap.Revert()
				check(kept)
			},
		},
		{
			name: "CheckPredicates changes nothing",
			run: func(t *testing.T, h *Engine, check func(string)) {
				base := state(t, h)
				for _, node := range h.snap.NodeNames() {
					if ferr := h.CheckPredicates(fx.WithTemplateClaim(fx.Pod("x", 100, nil), "gpu", "one"), node); ferr != nil {
						t.Errorf("CheckPredicates on %s: %v", node, ferr)
					}
				}
				check(base)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := forkWorld(t)
			tc.run(t, h, func(want string) {
				t.Helper()
				if got := state(t, h); got != want {
					t.Errorf("state differs:\n%s", diffStates(got, want))
				}
			})
			// Whatever was reverted must be placeable again, consistently.
			free := 8 - len(allocatedDevices(h))
			for i := 0; i < free; i++ {
				if _, _, ferr := h.PlaceOnAnyNode(gpuPod(fmt.Sprintf("fill-%d", i), 1), h.snap.NodeNames()); ferr != nil {
					t.Fatalf("after the scenario, pod %d of %d free devices: %v", i+1, free, ferr)
				}
			}
			if _, _, ferr := h.PlaceOnAnyNode(gpuPod("overflow", 1), h.snap.NodeNames()); ferr == nil {
				t.Errorf("a pod fits after all %d free devices were taken", free)
			}
		})
	}
}
