package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

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
	{"near-plain", func(p *v1.Pod) { // only in a zone plain pods reached: a rejection that ends
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(v1.LabelTopologyZone, "plain")}}}
	}},
	{"zone-spread-min3", func(p *v1.Pod) { // skew against 0 until the third zone has a node
		p.Spec.TopologySpreadConstraints = spread(v1.LabelTopologyZone, "zone-spread-min3")
		p.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](3)
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
func keptScript(t *testing.T, seed uint64, keep bool) ([]string, map[string]int) {
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
			place := h.PlaceOnAnyNode
			if rng.IntN(2) == 0 {
				place = h.PlaceOnFirstFitting // remembers anti-affinity and spread rejections
			}
			node, got, ferr := place(p, nodes)
			if ferr != nil {
				out = append(out, p.Name+" nowhere")
				continue
			}
			out = append(out, p.Name+" on "+node)
			placed = append(placed, got)
		}
	}
	hits := maps.Clone(h.kept.hits)
	hits["antiRejects"], hits["spreadRejects"] = h.rejects.used[names.InterPodAffinity], h.rejects.used[names.PodTopologySpread]
	return out, hits
}

// TestKeptStateMatchesFreshState replays random sequences with the
// spread and affinity state kept across cycles (and anti-affinity and
// spread rejections remembered) and computed afresh for every pod: every pod
// must go to the same node. Nodes added (new
// domains), pods removed and forks reverted are each in the sequences;
// without the rules that drop a kept state after them, or without
// finding the least-loaded spread domain again, pods land elsewhere.
func TestKeptStateMatchesFreshState(t *testing.T) {
	t.Setenv(VerifyShortcutsEnv, "1")
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fresh, _ := keptScript(t, seed, false)
			kept, hits := keptScript(t, seed, true)
			if hits[names.InterPodAffinity] == 0 || hits[names.PodTopologySpread] == 0 || hits["antiRejects"] == 0 || hits["spreadRejects"] == 0 {
				t.Fatalf("kept states used %v: the test checks too little", hits)
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
	if h.kept.hits[names.InterPodAffinity] == 0 {
		t.Fatal("no kept state was used")
	}
}

// TestKeptSpreadSeesNewNode: a node added after the spread state was kept
// is a new domain with no pods, which lowers the minimum; the pod must go
// there, not next to its sibling.
func TestKeptSpreadSeesNewNode(t *testing.T) {
	snap := snapshot.New()
	h := newEngine(t, snap)
	addNode(t, snap, "a", nil)
	addNode(t, snap, "b", nil)
	pod := func(i int) *v1.Pod {
		p := fx.Pod(fmt.Sprintf("web-%d", i), 100, nil)
		p.Labels = map[string]string{"kind": "host-spread"}
		p.Spec.TopologySpreadConstraints = spread(v1.LabelHostname, "host-spread")
		return p
	}
	// After a and b hold one each, c comes: it holds none, so the third
	// pod goes there, and the fourth, with one everywhere, back to a.
	for i, want := range []string{"a", "b", "c", "a"} {
		if i == 2 {
			addNode(t, snap, "c", nil)
		}
		if node, _, ferr := h.PlaceOnAnyNode(pod(i), []string{"a", "b", "c"}[:snap.NodeCount()]); ferr != nil || node != want {
			t.Fatalf("pod %d went to %q (%v), want %s", i, node, ferr, want)
		}
	}
	if h.kept.hits[names.PodTopologySpread] == 0 {
		t.Fatal("no kept spread state was used")
	}
}

// TestKeptAffinitySkipEnds: InterPodAffinity skips a plain pod while no
// placed pod's anti-affinity selects it; once one is placed, the next
// plain pod must keep out of its zone.
func TestKeptAffinitySkipEnds(t *testing.T) {
	snap := snapshot.New()
	h := newEngine(t, snap)
	for i, name := range []string{"a", "b"} {
		n := fx.Node(name, 4, 16, nil)
		n.Labels[v1.LabelTopologyZone] = fmt.Sprintf("zone-%d", i)
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	plain := func(i int) *v1.Pod {
		p := fx.Pod(fmt.Sprintf("plain-%d", i), 100, nil)
		p.Labels = map[string]string{"kind": "plain"}
		return p
	}
	mustPlace(t, h, plain(0), "a")
	mustPlace(t, h, plain(1), "a") // the Skip is kept and used
	avoid := fx.Pod("avoid", 100, nil)
	avoid.Labels = map[string]string{"kind": "zone-anti-plain"}
	avoid.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(v1.LabelTopologyZone, "plain")}}}
	mustPlace(t, h, avoid, "b")
	if node, _, ferr := h.PlaceOnAnyNode(plain(2), []string{"b", "a"}); ferr != nil || node != "a" {
		t.Fatalf("plain pod went to %q (%v), want a: b's zone holds a pod that keeps plain pods out", node, ferr)
	}
	if h.kept.hits[names.InterPodAffinity] == 0 {
		t.Fatal("no kept Skip was used")
	}
}

// TestRememberedSpreadRejectionEndsAtMinDomains: while fewer zones than
// minDomains hold nodes, spreading measures skew against 0, and a zone
// with one pod rejects the next. Once the third zone's node comes with a
// pod, the least count the Filter reads rises from 0 to 1 and the zone
// takes a pod again: the remembered rejection must end there, though the
// least count stored per domain was 1 all along.
func TestRememberedSpreadRejectionEndsAtMinDomains(t *testing.T) {
	snap := snapshot.New()
	h := newEngine(t, snap)
	addZoneNode := func(name, zone string) {
		n := fx.Node(name, 8, 32, nil)
		n.Labels[v1.LabelTopologyZone] = zone
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name string) *v1.Pod {
		p := fx.Pod(name, 100, nil)
		p.Labels = map[string]string{"kind": "min3"}
		p.Spec.TopologySpreadConstraints = spread(v1.LabelTopologyZone, "min3")
		p.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](3)
		return p
	}
	addZoneNode("n0", "zone-0")
	addZoneNode("n1", "zone-1")
	nodes := []string{"n0", "n1"}
	for _, name := range []string{"a", "b"} {
		if _, _, ferr := h.PlaceOnFirstFitting(pod(name), nodes); ferr != nil {
			t.Fatalf("pod %s: %v", name, ferr)
		}
	}
	// Both zones hold one: skew 2 against 0 everywhere.
	if node, _, _ := h.PlaceOnFirstFitting(pod("c"), nodes); node != "" {
		t.Fatalf("pod c went to %s; with two zones of one pod each and minDomains 3 it fits nowhere", node)
	}
	addZoneNode("n2", "zone-2")
	if _, ferr := h.Place(pod("d"), "n2"); ferr != nil {
		t.Fatal(ferr)
	}
	nodes = append(nodes, "n2")
	if node, _, _ := h.PlaceOnFirstFitting(pod("e"), nodes); node != "n0" {
		t.Errorf("pod e went to %q, want n0: three zones of one pod each, skew 1", node)
	}
	if h.rejects.used[names.PodTopologySpread] != 1 {
		t.Errorf("remembered spread rejections used %d times, want 1 (n1 for pod c)", h.rejects.used[names.PodTopologySpread])
	}
}
