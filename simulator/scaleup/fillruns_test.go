package scaleup

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// First fit on existing nodes copies a filled empty node's placements to
// the next identical empty node instead of running the plugins for each
// pod. The plan must be the slow path's, pod for pod and device for
// device, whatever the fleet: identical empty nodes, a node that differs
// (a label, fewer devices, a taint), nodes partly used, and a running
// pod with anti-affinity (copies off).
func TestFillCopiesAreTheSlowPath(t *testing.T) {
	type node struct {
		gpus   int
		labels map[string]string
		taint  bool
		used   int // one-GPU pods already running
	}
	identical := func(n int) []node {
		out := make([]node, n)
		for i := range out {
			out[i] = node{gpus: 8}
		}
		return out
	}
	cases := map[string]struct {
		nodes   []node
		pods    int
		antiPod bool
	}{
		"identical empty nodes":   {nodes: identical(6), pods: 44},
		"one node labelled apart": {nodes: append(identical(2), node{gpus: 8, labels: map[string]string{"zone": "b"}}, node{gpus: 8}, node{gpus: 8}), pods: 36},
		"one with fewer devices":  {nodes: append(identical(2), node{gpus: 4}, node{gpus: 8}, node{gpus: 8}), pods: 36},
		"one tainted":             {nodes: append(identical(2), node{gpus: 8, taint: true}, node{gpus: 8}), pods: 30},
		"partly used nodes":       {nodes: []node{{gpus: 8, used: 3}, {gpus: 8}, {gpus: 8, used: 8}, {gpus: 8}, {gpus: 8}}, pods: 30},
		"anti-affinity running":   {nodes: identical(4), pods: 30, antiPod: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := func(off bool) []Placement {
				snap := snapshot.New()
				for i, n := range tc.nodes {
					nn := fmt.Sprintf("free-%d", i)
					node := fx.Node(nn, 64, 256, nil)
					for k, v := range n.labels {
						node.Labels[k] = v
					}
					if n.taint {
						node.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
					}
					if err := snap.AddNode(node); err != nil {
						t.Fatal(err)
					}
					if err := snap.AddResourceSlice(fx.GPUSlice(nn, n.gpus)); err != nil {
						t.Fatal(err)
					}
				}
				p := newPlanner(t, snap)
				for i, n := range tc.nodes {
					for j := range n.used {
						if _, ferr := p.Engine.Place(fx.Pod(fmt.Sprintf("run-%d-%d", i, j), 100, fx.GPUs(fx.GPUResource, 1)), fmt.Sprintf("free-%d", i)); ferr != nil {
							t.Fatal(ferr)
						}
					}
				}
				if tc.antiPod {
					anti := fx.Pod("loner", 100, nil)
					anti.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}}}}
					if _, ferr := p.Engine.Place(anti, "free-3"); ferr != nil {
						t.Fatal(ferr)
					}
				}
				p.FirstFit, p.noFillCopies = true, off
				pl, err := p.Plan(replicas("buf", tc.pods, 100, fx.GPUs(fx.GPUResource, 1)))
				if err != nil {
					t.Fatal(err)
				}
				return pl.ExistingNodes
			}
			fast, slow := plan(false), plan(true)
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("placements differ from the slow path:\nfast %v\nslow %v", fast, slow)
			}
			if len(slow) == 0 {
				t.Errorf("no pod placed: the case tests nothing")
			}
		})
	}
}
