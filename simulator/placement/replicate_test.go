package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// TestReplicateMatchesPlacement: Replicate copies a filled node's placements
// onto an identical empty node; the result must be what running the plugins
// on that node gives: the same devices (in the node's own pool), mappings
// and claims, and the node must be as full afterwards.
func TestReplicateMatchesPlacement(t *testing.T) {
	gpus := func(n int64) v1.ResourceList { return fx.GPUs(fx.GPUResource, n) }
	tests := []struct {
		name string
		pod  func(i int) *v1.Pod
		n    int
	}{
		{name: "one-GPU pods", n: 8, pod: func(i int) *v1.Pod { return fx.Pod(fmt.Sprintf("p%d", i), 100, gpus(1)) }},
		{name: "three-GPU pods", n: 2, pod: func(i int) *v1.Pod { return fx.Pod(fmt.Sprintf("p%d", i), 100, gpus(3)) }},
		{name: "template claim plus GPU", n: 4, pod: func(i int) *v1.Pod {
			return fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("p%d", i), 100, gpus(1)), "gpu", "one")
		}},
		{name: "init container and sidecar", n: 4, pod: func(i int) *v1.Pod {
			return podWith(fmt.Sprintf("p%d", i), []v1.Container{
				fx.InitContainer("init", 100, gpus(1), false),
				fx.InitContainer("side", 100, gpus(1), true),
			}, fx.Container("main", 100, gpus(1)))
		}},
	}
	// placement of one pod, with the node name taken out.
	describe := func(h *Engine, p *v1.Pod, node string) string {
		var claims []string
		for _, c := range h.ClaimsOf(p) {
			claims = append(claims, strings.ReplaceAll(fmt.Sprint(deviceNames(c)), "/"+node+"/", "/NODE/"))
		}
		var mappings string
		if st := p.Status.ExtendedResourceClaimStatus; st != nil {
			mappings = fmtMappings(st.RequestMappings)
		}
		return fmt.Sprintf("claims %v mappings %s", claims, mappings)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 2, 8)
			h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("one", gpuClass, 1))
			var src, run []*v1.Pod
			for i := 0; i < tc.n; i++ {
				src = append(src, mustPlace(t, h, tc.pod(i), "node-0"))
				run = append(run, tc.pod(i+100))
			}
			if err := h.Replicate("node-0", src, "node-1", run); err != nil {
				t.Fatal(err)
			}
			for i, p := range run {
				replicated, node, ok := h.snap.Pod(p.UID)
				if !ok || node != "node-1" {
					t.Fatalf("pod %s: placed %v on %q, want node-1", p.Name, ok, node)
				}
				got, want := describe(h, replicated, "node-1"), describe(h, src[i], "node-0")
				if got != want {
					t.Errorf("pod %s:\n got %s\nwant %s", p.Name, got, want)
				}
			}
			if got, want := len(allocatedDevices(h)), 2*len(devicesOn(h, "node-0")); got != want {
				t.Errorf("allocated devices = %d, want %d", got, want)
			}
			if a, b := devicesOn(h, "node-0"), devicesOn(h, "node-1"); !slices.Equal(a, b) {
				t.Errorf("devices taken on node-0 %v, on node-1 %v", a, b)
			}
			// The replicated node is as full as the source: one more pod fits
			// on both or on neither.
			_, fitsSrc := h.Place(tc.pod(1000), "node-0")
			_, fitsDst := h.Place(tc.pod(2000), "node-1")
			if (fitsSrc == nil) != (fitsDst == nil) {
				t.Errorf("one more pod: node-0 %v, node-1 %v", fitsSrc, fitsDst)
			}
		})
	}
}

// devicesOn lists the taken device names of one node's pool.
func devicesOn(h *Engine, node string) []string {
	var out []string
	for _, d := range allocatedDevices(h) {
		if rest, ok := strings.CutPrefix(d, fx.Driver+"/"+node+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// A pod naming a claim of its own is replicated onto that claim; a named
// claim already allocated (held elsewhere) is not taken over, and nothing
// is placed.
func TestReplicateNamedClaims(t *testing.T) {
	for _, allocatedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("allocated=%v", allocatedFirst), func(t *testing.T) {
			h := cluster(t, 3, 8)
			var src, run []*v1.Pod
			for i := 0; i < 2; i++ {
				h.snap.SetResourceClaim(fx.Claim(fmt.Sprintf("src-%d", i), gpuClass, 1))
				h.snap.SetResourceClaim(fx.Claim(fmt.Sprintf("run-%d", i), gpuClass, 1))
				src = append(src, mustPlace(t, h, fx.WithClaim(fx.Pod(fmt.Sprintf("s%d", i), 100, nil), "gpu", fmt.Sprintf("src-%d", i)), "node-0"))
				run = append(run, fx.WithClaim(fx.Pod(fmt.Sprintf("r%d", i), 100, nil), "gpu", fmt.Sprintf("run-%d", i)))
			}
			if allocatedFirst {
				mustPlace(t, h, fx.WithClaim(fx.Pod("holder", 100, nil), "gpu", "run-1"), "node-2")
			}
			err := h.Replicate("node-0", src, "node-1", run)
			if allocatedFirst {
				if err == nil || len(podsOn(h, "node-1")) != 0 {
					t.Fatalf("replicated onto a claim held on node-2: err %v, node-1 holds %v", err, podsOn(h, "node-1"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range run {
				c := h.snap.ResourceClaim("default", fmt.Sprintf("run-%d", i))
				srcClaim := h.snap.ResourceClaim("default", fmt.Sprintf("src-%d", i))
				if got, want := fmt.Sprint(deviceNames(c)), strings.ReplaceAll(fmt.Sprint(deviceNames(srcClaim)), "/node-0/", "/node-1/"); got != want {
					t.Errorf("pod %s: its claim holds %s, want %s", p.Name, got, want)
				}
				if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID {
					t.Errorf("pod %s: its claim is reserved for %+v", p.Name, c.Status.ReservedFor)
				}
			}
		})
	}
}
