package scaledown

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/limits"
)

// TestMinimumsKeepNodes: no removal takes the cluster below a minimum of
// --cores-total, --memory-total or --gpu-total; the nodes kept say which,
// with CA's reason name. 4 busy and 6 light 64-core nodes with 8 GPUs
// each: 640 cores, 80 GPUs; all 6 light nodes are removable otherwise.
func TestMinimumsKeepNodes(t *testing.T) {
	gpus := func(name string, lo int64) limits.Limits {
		return limits.Limits{GPUs: []limits.GPULimit{{Type: v1.ResourceName(name), Range: limits.Range{Min: lo}}}}
	}
	tests := []struct {
		name        string
		lim         limits.Limits
		uncounted   string // a node already being removed
		wantRemoved int
		wantReason  string
	}{
		{name: "no minimum", lim: limits.Default(), wantRemoved: 6},
		{name: "cores: 448 of 640 must stay", lim: limits.Limits{Cores: limits.Range{Min: 448}}, wantRemoved: 3,
			wantReason: "min cluster cpu limit reached (--cores-total=448:0: the cluster is 0 above the minimum, the node has 64)"},
		{name: "memory: 2048 GiB of 2560 must stay", lim: limits.Limits{Memory: limits.Range{Min: 2048 * limits.GiB}}, wantRemoved: 2,
			wantReason: "min cluster memory limit reached"},
		{name: "DRA GPUs by extended resource name", lim: gpus("example.com/gpu", 64), wantRemoved: 2,
			wantReason: "min cluster example.com/gpu limit reached (--gpu-total=example.com/gpu:64:0: the cluster is 0 above the minimum, the node has 8)"},
		{name: "DRA GPUs by the implicit class name", lim: gpus("deviceclass.resource.kubernetes.io/gpu.example.com", 72), wantRemoved: 1,
			wantReason: "min cluster deviceclass.resource.kubernetes.io/gpu.example.com limit reached"},
		{name: "a node being removed no longer counts", lim: limits.Limits{Cores: limits.Range{Min: 448}}, uncounted: "light-0005", wantRemoved: 2,
			wantReason: "min cluster cpu limit reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := spreadCluster(t, 4, 4, 6, 2)
			opts := Options{UtilizationThreshold: 0.5, Limits: tc.lim}
			if tc.uncounted != "" {
				opts.Uncounted = func(n *v1.Node) bool { return n.Name == tc.uncounted }
				opts.MayRemove = func(n *v1.Node) bool { return n.Name != tc.uncounted }
			}
			removals, rejections := Find(h, opts)
			if len(removals) != tc.wantRemoved {
				t.Fatalf("removed %d nodes (%v), want %d; rejections %v", len(removals), removals, tc.wantRemoved, rejections)
			}
			kept := 0
			for _, r := range rejections {
				if r.Code != MinimalResourceLimitExceeded {
					continue
				}
				kept++
				if !strings.Contains(r.Reason, tc.wantReason) {
					t.Errorf("%s: reason %q, want %q", r.Node, r.Reason, tc.wantReason)
				}
			}
			light := 6
			if tc.uncounted != "" {
				light = 5
			}
			if tc.wantReason != "" && kept != light-tc.wantRemoved {
				t.Errorf("%d nodes kept for a minimum, want %d", kept, light-tc.wantRemoved)
			}
		})
	}
}

// TestGroupRoomLeavesSpareForOtherGroups: a node its group's min size keeps
// does not use up a resource minimum's spare, so another group's node can
// still go.
func TestGroupRoomLeavesSpareForOtherGroups(t *testing.T) {
	h := spreadCluster(t, 4, 4, 6, 2)
	group := func(node string) string {
		if node == "light-0000" || node == "light-0001" {
			return "pinned" // at its min size
		}
		return "free"
	}
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5, Limits: limits.Limits{Cores: limits.Range{Min: 576}},
		GroupRoom: map[string]int{"pinned": 0, "free": 10}, GroupOf: group})
	if len(removals) != 1 || group(removals[0].Node) != "free" {
		t.Fatalf("removals = %v, want one node of group free; rejections %v", removals, rejections)
	}
}
