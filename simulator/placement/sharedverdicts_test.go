package placement

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// sharedFleet is 120 8-GPU nodes, zone a (node-000..059) and zone b
// (node-060..119), shaped by the case; more than maxReps nodes, so a
// cycle may run PreFilter for one node per state.
type sharedFleet struct {
	name string
	// node changes a node before it joins; running places pods there.
	node    func(i int, n *v1.Node)
	running func(i int) []*v1.Pod
	// pod is the i-th pod placed; between runs before it.
	pod     func(i int) *v1.Pod
	between func(h *Engine, i int)
	// share says verdicts must be shared and placements copied (the case
	// must not be vacuous), or neither.
	share bool
}

func buildSharedFleet(t *testing.T, fc sharedFleet, share bool) (*Engine, *NodeScan, []string) {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
	h := newEngine(t, snap)
	var nodes []string
	for i := range 120 {
		name := fmt.Sprintf("node-%03d", i)
		n := fx.Node(name, 64, 256, nil)
		n.Labels[v1.LabelTopologyZone] = map[bool]string{true: "a", false: "b"}[i < 60]
		if fc.node != nil {
			fc.node(i, n)
		}
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(name, 8)); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, name)
	}
	for i, name := range nodes {
		if fc.running == nil {
			break
		}
		for _, p := range fc.running(i) {
			mustPlace(t, h, p, name)
		}
	}
	scan := h.NewNodeScan(nodes)
	if !share {
		scan.shared.states = nil
	}
	return h, scan, nodes
}

// Placing pods one by one over a fleet with verdicts shared by node
// state gives every pod the node and devices the full path gives. Each
// case fails when the state leaves out what it is about.
func TestSharedVerdictsAreTheFullPath(t *testing.T) {
	gpuPod := func(i int) *v1.Pod {
		return fx.WithLabels(fx.Pod(fmt.Sprintf("web-%d", i), 100, fx.GPUs(fx.GPUResource, 1)), map[string]string{"app": "web"})
	}
	cpuPod := func(i int) *v1.Pod {
		return fx.WithLabels(fx.Pod(fmt.Sprintf("web-%d", i), 100, nil), map[string]string{"app": "web"})
	}
	noRequests := func(name string) *v1.Pod {
		p := fx.Pod(name, 0, nil)
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		return p
	}
	oneZone := func(_ int, n *v1.Node) { n.Labels[v1.LabelTopologyZone] = "a" }
	for _, fc := range []sharedFleet{
		{name: "identical nodes filling up", pod: gpuPod, share: true},
		{name: "some GPUs taken", pod: gpuPod, share: true, running: func(i int) []*v1.Pod {
			if i%3 != 0 {
				return nil
			}
			return []*v1.Pod{fx.Pod(fmt.Sprintf("run-%d", i), 100, fx.GPUs(fx.GPUResource, int64(1+i%5)))}
		}},
		// Equal requests, unequal requests as scoring counts them (a pod
		// without requests counts 100m, one asking 0 none): zone b's
		// nodes score emptier.
		{name: "requests as scoring counts them", pod: cpuPod, share: true, node: oneZone, running: func(i int) []*v1.Pod {
			pods := []*v1.Pod{fx.Pod(fmt.Sprintf("run-%d", i), map[bool]int64{true: 6400, false: 0}[i < 60], nil)}
			for j := range 64 {
				if i < 60 {
					pods = append(pods, noRequests(fmt.Sprintf("bare-%d-%d", i, j)))
				} else {
					pods = append(pods, fx.Pod(fmt.Sprintf("small-%d-%d", i, j), 100, nil))
				}
			}
			return pods
		}},
		{name: "PreferNoSchedule taint", pod: cpuPod, share: true, node: func(i int, n *v1.Node) {
			oneZone(i, n)
			if i < 60 {
				n.Spec.Taints = []v1.Taint{{Key: "spot", Effect: v1.TaintEffectPreferNoSchedule}}
			}
		}},
		// Pods placed on a fork that is reverted leave the nodes as they
		// were: the states by position are rebuilt.
		{name: "a fork reverted between searches", pod: gpuPod, share: true, between: func(h *Engine, i int) {
			switch i {
			case 40:
				h.Snapshot().Fork()
			case 70:
				h.Snapshot().Revert()
			}
		}},
		// A pod preferring one host by name shares nothing.
		{name: "preferred by host name", pod: func(i int) *v1.Pod {
			p := cpuPod(i)
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
				Weight: 100, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"node-090"}}}}}}}}
			return p
		}},
		// A running pod keeps web out of zone a: nothing is shared.
		{name: "a running pod's anti-affinity", pod: cpuPod, running: func(i int) []*v1.Pod {
			if i != 0 {
				return nil
			}
			p := fx.WithPodAntiAffinity(fx.Pod("guard", 100, nil), "app", "web")
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = v1.LabelTopologyZone
			return []*v1.Pod{p}
		}},
	} {
		t.Run(fc.name, func(t *testing.T) {
			place := func(share bool) ([]string, *sharedVerdicts) {
				h, scan, nodes := buildSharedFleet(t, fc, share)
				var got []string
				for i := range 150 {
					if fc.between != nil {
						fc.between(h, i)
					}
					node, placed, ferr := h.PlaceBestScanned(fc.pod(i), "web", nodes, scan)
					if ferr != nil {
						got = append(got, "unplaced: "+ferr.Error())
						continue
					}
					got = append(got, fmt.Sprintf("%s %v", node, h.devicesOf(placed)))
				}
				return got, scan.shared
			}
			want, _ := place(false)
			got, v := place(true)
			hits := v.hits
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("pod %d: shared verdicts placed it %s, the full path %s", j, got[j], want[j])
				}
			}
			if fc.share && hits == 0 {
				t.Errorf("no verdict was shared")
			}
			if !fc.share && hits > 0 {
				t.Errorf("%d verdicts shared, want none", hits)
			}
			if fc.share != (v.copied > 0) {
				t.Errorf("%d placements copied, want some: %v", v.copied, fc.share)
			}
		})
	}
}

// Where ImageLocality scores, nodes with other images are in other
// states. (The snapshot leaves the scheduler's image states empty today,
// so no placement shows it.)
func TestSharedStatesSeeImages(t *testing.T) {
	h, scan, _ := buildSharedFleet(t, sharedFleet{node: func(i int, n *v1.Node) {
		if i == 1 {
			n.Status.Images = []v1.ContainerImage{{Names: []string{"registry.example/app:latest"}, SizeBytes: 800 << 20}}
		}
	}}, true)
	if !h.scoresImages() || !scan.shared.states.withImages {
		t.Fatal("the default profile scores images, and its states do not tell them")
	}
	if a, b, c := scan.shared.states.Key("node-000"), scan.shared.states.Key("node-001"), scan.shared.states.Key("node-002"); a == b || a != c {
		t.Errorf("states %q (no images), %q (an image), %q (no images): want the image apart", a, b, c)
	}
}
