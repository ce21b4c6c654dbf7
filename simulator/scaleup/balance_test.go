package scaleup

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// TestBalanceSimilarNodeGroups: with --balance-similar-node-groups a
// scale-up is split across the groups similar to the chosen one, smallest
// first, as CA does; groups that differ (capacity, labels not ignored,
// template devices) are not.
func TestBalanceSimilarNodeGroups(t *testing.T) {
	zone := func(z string) map[string]string {
		return map[string]string{"topology.kubernetes.io/zone": z, "pool": "web"}
	}
	withLabel := func(g *nodegroup.NodeGroup, k, v string) *nodegroup.NodeGroup {
		g.Spec.Template.Labels[k] = v
		return g
	}
	halfDevices := draGroup("gpu-b", 4, 100)
	halfDevices.Spec.ResourceSlices = []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 4).Spec}
	tests := []struct {
		name   string
		opts   limits.Options
		groups []*nodegroup.NodeGroup
		// full[g] live nodes of group g whose CPU is all taken
		full map[string]int
		cpu  int // pending 1-CPU pods
		gpus int // pending 1-GPU pods
		want map[string]int
	}{{
		name: "off: one group takes it all", opts: limits.Options{},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 100, zone("a")), plainGroup("web-b", 4, 100, zone("b")), plainGroup("web-c", 4, 100, zone("c"))},
		cpu:    24, want: map[string]int{"web-a": 6},
	}, {
		name: "three zones split evenly", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 100, zone("a")), plainGroup("web-b", 4, 100, zone("b")), plainGroup("web-c", 4, 100, zone("c"))},
		cpu:    24, want: map[string]int{"web-a": 2, "web-b": 2, "web-c": 2},
	}, {
		name: "the smaller group grows first", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 100, zone("a")), plainGroup("web-b", 4, 100, zone("b"))},
		full:   map[string]int{"web-a": 2}, cpu: 24, want: map[string]int{"web-a": 2, "web-b": 4},
	}, {
		name: "max size is kept", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 1, zone("a")), plainGroup("web-b", 4, 100, zone("b"))},
		cpu:    24, want: map[string]int{"web-a": 1, "web-b": 5},
	}, {
		name: "a label that differs keeps groups apart", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{withLabel(plainGroup("web-a", 4, 100, zone("a")), "tier", "x"), withLabel(plainGroup("web-b", 4, 100, zone("b")), "tier", "y")},
		cpu:    16, want: map[string]int{"web-a": 4},
	}, {
		name: "--balancing-ignore-label makes them similar", opts: limits.Options{Balancing: limits.Balancing{Enabled: true, IgnoreLabels: []string{"tier"}}},
		groups: []*nodegroup.NodeGroup{withLabel(plainGroup("web-a", 4, 100, zone("a")), "tier", "x"), withLabel(plainGroup("web-b", 4, 100, zone("b")), "tier", "y")},
		cpu:    16, want: map[string]int{"web-a": 2, "web-b": 2},
	}, {
		name: "different CPU capacity is not similar", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 100, zone("a")), plainGroup("web-b", 8, 100, zone("b"))},
		cpu:    16, want: map[string]int{"web-a": 4},
	}, {
		name: "--balancing-label compares only that label", opts: limits.Options{Balancing: limits.Balancing{Enabled: true, Labels: []string{"pool"}}},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 100, zone("a")), plainGroup("web-b", 8, 100, zone("b"))},
		// 6 nodes of web-a split 3/3; web-b's 8-core nodes need only 2
		// for their 12 pods.
		cpu: 24, want: map[string]int{"web-a": 3, "web-b": 2},
	}, {
		name: "equal template devices: GPU groups split", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-a", 8, 100), draGroup("gpu-b", 8, 100)},
		gpus:   32, want: map[string]int{"gpu-a": 2, "gpu-b": 2},
	}, {
		name: "different template devices: not similar", opts: limits.Options{Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{draGroup("gpu-a", 8, 100), halfDevices},
		gpus:   32, want: map[string]int{"gpu-a": 4},
	}, {
		name: "--max-nodes-per-scaleup caps the balanced scale-up as a whole", opts: limits.Options{MaxNodesPerScaleUp: 4, Balancing: limits.Balancing{Enabled: true}},
		groups: []*nodegroup.NodeGroup{plainGroup("web-a", 4, 100, zone("a")), plainGroup("web-b", 4, 100, zone("b"))},
		cpu:    40, want: map[string]int{"web-a": 5, "web-b": 5},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			for g, n := range tc.full {
				for i := range n {
					node := fx.Node(fmt.Sprintf("%s-live-%d", g, i), 4, 16, nil)
					node.Labels[nodegroup.GroupLabel] = g
					if err := snap.AddNode(node); err != nil {
						t.Fatal(err)
					}
					busy := fx.Pod(node.Name+"-busy", 4000, nil)
					busy.Spec.NodeName = node.Name
					if err := snap.AddPod(busy); err != nil {
						t.Fatal(err)
					}
				}
			}
			p := newPlanner(t, snap, tc.groups...)
			p.Limits = tc.opts
			pods := replicas("web", tc.cpu, 1000, nil)
			pods = append(pods, replicas("train", tc.gpus, 100, fx.GPUs(fx.GPUResource, 1))...)
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			if got := newNodesPerGroup(plan); !sameCounts(got, tc.want) {
				t.Fatalf("new nodes per group = %v, want %v", got, tc.want)
			}
			if len(plan.NoScaleUp) != 0 {
				t.Fatalf("noScaleUp = %+v, want every pod helped", plan.NoScaleUp)
			}
			// The first loop is the whole balanced split when it is one.
			first := 0
			for _, su := range plan.FirstLoop {
				first += su.NewNodes
			}
			if tc.opts.MaxNodesPerScaleUp > 0 && first > tc.opts.MaxNodesPerScaleUp {
				t.Fatalf("first loop adds %d nodes, more than --max-nodes-per-scaleup %d", first, tc.opts.MaxNodesPerScaleUp)
			}
		})
	}
}
