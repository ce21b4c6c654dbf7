package scaleup

import (
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// newNodesPerGroup sums a plan's new nodes per group.
func newNodesPerGroup(plan *Plan) map[string]int {
	out := map[string]int{}
	for _, su := range plan.ScaleUps {
		out[su.NodeGroup] += su.NewNodes
	}
	return out
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestResourceLimitsCapScaleUp: each maximum cuts the scale-up to the
// nodes that fit under it, counting the nodes already there; the pods left
// out say which limit, in CA's words.
func TestResourceLimitsCapScaleUp(t *testing.T) {
	gi := limits.GiB
	gpu := func(name string, lo, hi int64) []limits.GPULimit {
		return []limits.GPULimit{{Type: v1.ResourceName(name), Range: limits.Range{Min: lo, Max: hi}}}
	}
	tests := []struct {
		name     string
		lim      limits.Limits
		groups   []*nodegroup.NodeGroup
		existing []*v1.Node
		pods     []*v1.Pod
		want     map[string]int
		// left out: how many pods, and the words of their reason
		leftOut    int
		wantReason []string
		code       ReasonCode // "": ResourceLimitReached
	}{{
		name: "cores: two 64-core nodes under 128", lim: limits.Limits{Cores: limits.Range{Max: 128}},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100)}, pods: replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)),
		want: map[string]int{"gpu-dra": 2}, leftOut: 48,
		wantReason: []string{"node group gpu-dra: max cluster cpu limit reached", "--cores-total=0:128 leaves 0, a node adds 64"},
	}, {
		name: "cores: existing nodes count", lim: limits.Limits{Cores: limits.Range{Max: 192}},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100)}, pods: replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)),
		existing: []*v1.Node{fx.Node("other", 64, 256, nil)},
		want:     map[string]int{"gpu-dra": 2}, leftOut: 48,
		wantReason: []string{"max cluster cpu limit reached"},
	}, {
		name: "memory: two 256 GiB nodes under 600 GiB", lim: limits.Limits{Memory: limits.Range{Max: 600 * gi}},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100)}, pods: replicas("train", 24, 500, fx.GPUs(fx.GPUResource, 1)),
		want: map[string]int{"gpu-dra": 2}, leftOut: 8,
		wantReason: []string{"max cluster memory limit reached", "--memory-total=0:600 leaves 88Gi, a node adds 256Gi"},
	}, {
		name: "gpu-total by the class's extended resource name counts DRA devices", lim: limits.Limits{GPUs: gpu("example.com/gpu", 0, 16)},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100)}, pods: replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)),
		want: map[string]int{"gpu-dra": 2}, leftOut: 48,
		wantReason: []string{"max cluster example.com/gpu limit reached", "--gpu-total=example.com/gpu:0:16 leaves 0, a node adds 8"},
	}, {
		name: "gpu-total by the implicit DeviceClass name", lim: limits.Limits{GPUs: gpu("deviceclass.resource.kubernetes.io/gpu.example.com", 0, 24)},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100)}, pods: replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)),
		want: map[string]int{"gpu-dra": 3}, leftOut: 40,
		wantReason: []string{"max cluster deviceclass.resource.kubernetes.io/gpu.example.com limit reached"},
	}, {
		name: "gpu-total counts device-plugin GPUs too", lim: limits.Limits{GPUs: gpu("example.com/gpu", 0, 4)},
		groups: []*nodegroup.NodeGroup{devicePluginGroup("gpu-dp", 2, 100)}, pods: replicas("train", 8, 500, fx.GPUs(fx.GPUResource, 1)),
		want: map[string]int{"gpu-dp": 2}, leftOut: 4,
		wantReason: []string{"node group gpu-dp: max cluster example.com/gpu limit reached"},
	}, {
		name: "gpu-total counts GPUs on existing nodes", lim: limits.Limits{GPUs: gpu("example.com/gpu", 0, 4)},
		groups:   []*nodegroup.NodeGroup{devicePluginGroup("gpu-dp", 2, 100)},
		existing: []*v1.Node{fx.Node("busy", 1, 1, fx.GPUs(fx.GPUResource, 2))}, // too little CPU to take a pod
		pods:     replicas("train", 8, 1500, fx.GPUs(fx.GPUResource, 1)),
		want:     map[string]int{"gpu-dp": 1}, leftOut: 6,
		wantReason: []string{"max cluster example.com/gpu limit reached"},
	}, {
		name: "a GPU limit does not hold back a group without those GPUs", lim: limits.Limits{GPUs: gpu("example.com/gpu", 0, 8)},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100), plainGroup("cpu", 4, 100, nil)},
		pods:   append(replicas("train", 16, 500, fx.GPUs(fx.GPUResource, 1)), replicas("web", 8, 1000, nil)...),
		want:   map[string]int{"gpu-dra": 1, "cpu": 2}, leftOut: 8, code: MultipleReasons,
		wantReason: []string{"node group gpu-dra: max cluster example.com/gpu limit reached", "node group cpu: needs 1 example.com/gpu; a cpu node offers none"},
	}, {
		name: "under every limit nothing changes", lim: limits.Default(),
		groups: []*nodegroup.NodeGroup{draGroup("gpu-dra", 8, 100)}, pods: replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)),
		want: map[string]int{"gpu-dra": 8},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			for _, n := range tc.existing {
				if err := snap.AddNode(n); err != nil {
					t.Fatal(err)
				}
			}
			p := newPlanner(t, snap, tc.groups...)
			p.Limits = limits.Options{Limits: tc.lim}
			plan, err := p.Plan(tc.pods)
			if err != nil {
				t.Fatal(err)
			}
			if got := newNodesPerGroup(plan); !sameCounts(got, tc.want) {
				t.Fatalf("new nodes per group = %v, want %v", got, tc.want)
			}
			if len(plan.NoScaleUp) != tc.leftOut {
				t.Fatalf("%d pods left out, want %d: %+v", len(plan.NoScaleUp), tc.leftOut, plan.NoScaleUp)
			}
			code := tc.code
			if code == "" {
				code = ResourceLimitReached
			}
			for _, n := range plan.NoScaleUp {
				if n.Code != code {
					t.Errorf("%s: code %s, want %s (%s)", n.Pod, n.Code, code, n.Reason)
				}
				for _, w := range tc.wantReason {
					if !strings.Contains(n.Reason, w) {
						t.Errorf("%s: reason %q, want it to say %q", n.Pod, n.Reason, w)
					}
				}
			}
		})
	}
}

// plainGroup is a group of CPU nodes with the given labels.
func plainGroup(name string, cores int64, maxSize int, labels map[string]string) *nodegroup.NodeGroup {
	tmpl := fx.Node("template", cores, 16, nil)
	for k, v := range labels {
		tmpl.Labels[k] = v
	}
	return &nodegroup.NodeGroup{Spec: nodegroup.Spec{MaxSize: maxSize, Template: *tmpl}, ObjectMeta: groupMeta(name)}
}

// TestMaxNodesPerScaleUp: one loop adds at most --max-nodes-per-scaleup
// nodes; the plan's later loops add the rest, each entry within the cap.
func TestMaxNodesPerScaleUp(t *testing.T) {
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 100))
	p.Limits = limits.Options{MaxNodesPerScaleUp: 3}
	plan, err := p.Plan(replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, su := range plan.ScaleUps {
		sizes = append(sizes, su.NewNodes)
	}
	if want := []int{3, 3, 2}; !equalInts(sizes, want) {
		t.Fatalf("scale-ups of gpu-dra = %v, want %v (8 nodes, at most 3 a loop)", sizes, want)
	}
	if len(plan.FirstLoop) != 1 || plan.FirstLoop[0].NewNodes != 3 || len(plan.FirstLoop[0].Pods) != 24 {
		t.Fatalf("first loop = %+v, want gpu-dra +3 for 24 pods", plan.FirstLoop)
	}
	if len(plan.NoScaleUp) != 0 {
		t.Fatalf("noScaleUp = %+v, want every pod helped over the loops", plan.NoScaleUp)
	}
}

func equalInts(a, b []int) bool {
	sort.Ints(a)
	sort.Ints(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func groupMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
