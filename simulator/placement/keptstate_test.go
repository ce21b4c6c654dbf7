package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// keptKinds are pods whose Filter verdicts read the pods placed: spread
// and (anti-)affinity by zone and by host, against their own kind and
// against another.
var keptKinds = []struct {
	name  string
	shape func(p *v1.Pod)
}{
	{"plain", func(*v1.Pod) {}},
	{"zone-spread", func(p *v1.Pod) { p.Spec.TopologySpreadConstraints = spread(v1.LabelTopologyZone, "zone-spread") }},
	{"host-spread", func(p *v1.Pod) { p.Spec.TopologySpreadConstraints = spread(v1.LabelHostname, "host-spread") }},
	{"zone-affinity", func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(v1.LabelTopologyZone, "zone-affinity")}}}
	}},
	{"host-anti", func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(v1.LabelHostname, "host-anti")}}}
	}},
	{"zone-anti-plain", func(p *v1.Pod) { // keeps plain pods out of its zone, and stays out of theirs
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(v1.LabelTopologyZone, "plain")}}}
	}},
}

func spread(key, kind string) []v1.TopologySpreadConstraint {
	return []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": kind}}}}
}

func term(key, kind string) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": kind}}, TopologyKey: key}
}

// keptScript replays one random sequence of node adds, placements,
// removals and forks on an engine and returns where each pod went.
func keptScript(t *testing.T, seed uint64, keep bool) ([]string, int) {
	t.Helper()
	snap := snapshot.New()
	h := newEngine(t, snap)
	h.kept.off = !keep
	rng := rand.New(rand.NewPCG(seed, 5004))
	var nodes []string
	var placed []*v1.Pod
	var out []string
	addNode := func() {
		name := fmt.Sprintf("n%d", len(nodes))
		n := fx.Node(name, 4, 16, nil)
		n.Labels[v1.LabelTopologyZone] = fmt.Sprintf("zone-%d", rng.IntN(3))
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, name)
	}
	addNode()
	forks := 0
	for i := range 400 {
		switch op := rng.IntN(20); {
		case op < 3 && len(nodes) < 40:
			addNode()
		case op == 3 && len(placed) > 0:
			j := rng.IntN(len(placed))
			if _, err := h.Remove(placed[j].UID); err != nil {
				t.Fatal(err)
			}
			out = append(out, "removed "+placed[j].Name)
			placed = slices.Delete(placed, j, j+1)
		case op == 4 && forks < 3:
			snap.Fork()
			forks++
		case op == 5 && forks > 0:
			snap.Revert()
			forks--
			placed = slices.DeleteFunc(placed, func(p *v1.Pod) bool { _, _, ok := snap.Pod(p.UID); return !ok })
			nodes = slices.DeleteFunc(nodes, func(n string) bool { return snap.NodeInfo(n) == nil })
			out = append(out, "reverted")
		case op == 6 && forks > 0:
			snap.Commit()
			forks--
		default:
			k := keptKinds[rng.IntN(len(keptKinds))]
			p := fx.Pod(fmt.Sprintf("%s-%d", k.name, i), 100+rng.Int64N(900), nil)
			p.Labels = map[string]string{"kind": k.name}
			k.shape(p)
			node, got, ferr := h.PlaceOnAnyNode(p, nodes)
			if ferr != nil {
				out = append(out, p.Name+" nowhere")
				continue
			}
			out = append(out, p.Name+" on "+node)
			placed = append(placed, got)
		}
	}
	return out, h.kept.hits
}

// TestKeptStateMatchesFreshState replays random sequences with the
// affinity state kept across cycles and computed afresh for every pod:
// every pod must go to the same node. Nodes added, pods removed and forks
// reverted are each in the sequences; without the rule that drops a kept
// state after a removal or a revert, pods land elsewhere.
func TestKeptStateMatchesFreshState(t *testing.T) {
	t.Setenv(VerifyShortcutsEnv, "1")
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fresh, _ := keptScript(t, seed, false)
			kept, hits := keptScript(t, seed, true)
			if hits == 0 {
				t.Fatal("no kept state was used: the test checks nothing")
			}
			for i := range fresh {
				if i >= len(kept) || kept[i] != fresh[i] {
					t.Fatalf("step %d: kept state gives %q, fresh state %q", i, at(kept, i), fresh[i])
				}
			}
		})
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

// TestKeptAffinitySeesRemovedPod: once the pod an anti-affinity term
// kept out of a node is removed, the kept state must not keep the next
// one out.
func TestKeptAffinitySeesRemovedPod(t *testing.T) {
	snap := snapshot.New()
	h := newEngine(t, snap)
	addNode(t, snap, "a", nil)
	pod := func(i int) *v1.Pod {
		p := fx.Pod(fmt.Sprintf("db-%d", i), 100, nil)
		p.Labels = map[string]string{"kind": "host-anti"}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(v1.LabelHostname, "host-anti")}}}
		return p
	}
	first := mustPlace(t, h, pod(0), "a")
	if _, ferr := h.Place(pod(1), "a"); ferr == nil {
		t.Fatal("a second pod joined its anti-affine sibling")
	}
	if _, err := h.Remove(first.UID); err != nil {
		t.Fatal(err)
	}
	mustPlace(t, h, pod(2), "a")
	snap.Fork()
	if _, ferr := h.Place(pod(3), "a"); ferr == nil {
		t.Fatal("a pod joined its anti-affine sibling")
	}
	snap.Revert()
	if h.kept.hits == 0 {
		t.Fatal("no kept state was used")
	}
}
