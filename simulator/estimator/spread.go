package estimator

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
)

// Spread answers Scored for one group and one list of pods at several node
// counts, at about the cost of packing them rather than pods times nodes
// scheduling cycles.
//
// Fresh nodes of one group that took the same kinds of pods in the same
// order are in the same state: the allocator is deterministic (what
// Replicate relies on), so they offer the same devices, and every Filter
// and Score plugin reads only the node's own state for such pods (see
// nodeLocal). Such nodes form a class. The scheduler's choice for a pod is
// then a function of its kind and of the classes present in node order:
// within a class scores are equal, so the first node of the best class
// wins ties as the first best node does, and scores are normalized by
// their maximum (or minimum), which the class's first node carries as
// well as any. So each pod is scheduled against the first node of each
// class only, the choice is remembered by kind and class list for all
// counts, and a kind placed on a class before is copied from that
// placement (placement.Replicate) instead of allocated again.
type Spread struct {
	b    *BinPacking
	g    *nodegroup.NodeGroup
	pods []*v1.Pod
	// local says the plugins' verdicts depend on the node's own state; if
	// not, Place is Scored.
	local bool
	kinds []string // per pod
	// fits is whether a node of a class takes a kind of pod (Filter).
	fits map[classStep]bool
	// choices maps a kind and the classes whose nodes take it, in node
	// order, to the index of the class the scheduler's scoring picks.
	choices map[string]int
	// steps interns classes: a class and the kind it takes -> the class
	// it becomes. Class 0 is a fresh node.
	steps map[classStep]int
}

type classStep struct {
	class int
	kind  string
}

// placedAt is a pod placed on a node of a class, the source of copies.
type placedAt struct {
	node string
	pod  *v1.Pod
}

// NewSpread prepares placing pods, in the order given, onto fresh nodes of
// the group. Placements run on the placement engine's snapshot.
func (b *BinPacking) NewSpread(g *nodegroup.NodeGroup, pods []*v1.Pod) *Spread {
	s := &Spread{b: b, g: g, pods: pods, choices: map[string]int{}, fits: map[classStep]bool{}, steps: map[classStep]int{}}
	kinds := b.Kinds
	if kinds == nil {
		kinds = &Kinds{}
	}
	s.local = b.nodeLocal(pods, kinds)
	if s.local {
		s.kinds = make([]string, len(pods))
		for i, p := range pods {
			s.kinds[i] = kinds.Alike(p)
		}
	}
	return s
}

// nodeLocal reports whether every Filter and Score verdict for these pods
// on a fresh node of the group depends only on the pods placed there
// before them: no inter-pod (anti-)affinity or hard default spreading
// (labelBlind), no topology spread constraints, shared claims or volumes
// that bind cluster-wide (placement.Replicable), no node chosen by name
// (nodes differ by name only), and no devices outside a node's own slices
// (a shared pool drains from any node). The scheduler's default soft
// spreading selects pods by their Services and ReplicaSets, which the
// placement engine's listers do not hold, so it scores every node alike.
func (b *BinPacking) nodeLocal(pods []*v1.Pod, kinds *Kinds) bool {
	if !b.labelBlind(pods) || SelectsNodesByName(pods) || len(b.Engine.Snapshot().SlicesForNode("")) > 0 {
		return false
	}
	for _, p := range pods {
		if !placement.Replicable(p, kinds.OwnsNamedClaims(p)) {
			return false
		}
	}
	return true
}

// Place is Scored(g, pods, n) for the prepared pods: the same placements,
// result and snapshot.
func (s *Spread) Place(n int) (*Result, bool, error) {
	if !s.local {
		return s.b.Scored(s.g, s.pods, n)
	}
	res := &Result{Group: s.g.Name, Placed: map[types.UID]string{}}
	for i := 0; i < n; i++ {
		name := s.b.Namer(s.g.Name, i)
		if err := s.b.addNode(s.g, name); err != nil {
			return nil, false, err
		}
		res.NewNodes = append(res.NewNodes, name)
	}
	p := &pass{s: s, res: res, class: make([]int, n), members: map[int]int{0: n}, sources: map[classStep]placedAt{}, seen: map[int]bool{}}
	all := true
	for i, pod := range s.pods {
		node, placed := p.place(pod, s.kinds[i])
		if node < 0 {
			res.Unplaced = append(res.Unplaced, Unplaced{Pod: pod})
			all = false
			continue
		}
		p.took(node, s.kinds[i], placed)
		res.Placed[pod.UID] = res.NewNodes[node]
		res.PlacedOrder = append(res.PlacedOrder, pod)
	}
	return res, all, nil
}

// pass is one count's placement.
type pass struct {
	s       *Spread
	res     *Result
	class   []int       // per node
	members map[int]int // nodes per class
	// sources are this count's placements, by the class of the node
	// before and the kind: later ones are copies of them.
	sources map[classStep]placedAt
	// feasible are the first node of each class that takes the pod, in
	// node order; key is the kind and their classes.
	feasible []int
	seen     map[int]bool
	key      strings.Builder
}

// place places the pod as the scheduler would and returns the node's
// index and the placed pod, or -1. Under placement.VerifyShortcutsEnv the
// scheduler's choice over every new node (on a fork, undone) must be the
// node the classes give.
func (p *pass) place(pod *v1.Pod, kind string) (int, *v1.Pod) {
	h := p.s.b.Engine
	if !h.VerifiesShortcuts() {
		return p.choose(pod, kind)
	}
	snap := h.Snapshot()
	snap.Fork()
	want, _, _ := h.PlaceBest(pod, p.res.NewNodes)
	snap.Revert()
	j, placed := p.choose(pod, kind)
	got := ""
	if j >= 0 {
		got = p.res.NewNodes[j]
	}
	if got != want {
		placement.ShortcutDiffers("Spread", "pod %s/%s goes to new node %q, the scheduler's scoring over all %d picks %q",
			pod.Namespace, pod.Name, got, len(p.res.NewNodes), want)
	}
	return j, placed
}

// choose is place by classes.
func (p *pass) choose(pod *v1.Pod, kind string) (int, *v1.Pod) {
	s, h := p.s, p.s.b.Engine
	p.candidates(pod, kind)
	if len(p.feasible) == 0 {
		return -1, nil
	}
	nodes := p.res.NewNodes
	names := make([]string, len(p.feasible))
	for r, j := range p.feasible {
		names[r] = nodes[j]
	}
	key := p.key.String()
	choice, ok := s.choices[key]
	if !ok {
		// The nodes are known to take the pod: only scoring is left.
		choice, ok = h.BestOf(pod, names)
	}
	if ok {
		j := p.feasible[choice]
		if src, ok := p.sources[classStep{p.class[j], kind}]; ok && h.Replicate(src.node, []*v1.Pod{src.pod}, nodes[j], []*v1.Pod{pod}) == nil {
			s.choices[key] = choice
			placed, _, _ := h.Snapshot().Pod(pod.UID)
			return j, placed
		}
		if placed, ferr := h.Place(pod, nodes[j]); ferr == nil {
			s.choices[key] = choice
			return j, placed
		}
		// Not the node's own verdict after all: schedule this pod in full.
		delete(s.choices, key)
	}
	node, placed, ferr := h.PlaceBest(pod, names)
	if ferr != nil {
		return -1, nil
	}
	for r, name := range names {
		if name == node {
			s.choices[key] = r
			return p.feasible[r], placed
		}
	}
	return -1, nil
}

// candidates lists, in p.feasible, the first node of each class that
// takes the pod (nodes of other classes and the infeasible score
// nothing), learning each class's verdict for the kind once, and sets
// p.key.
func (p *pass) candidates(pod *v1.Pod, kind string) {
	s := p.s
	p.feasible = p.feasible[:0]
	clear(p.seen)
	p.key.Reset()
	p.key.WriteString(kind)
	for j, c := range p.class {
		if p.seen[c] {
			continue
		}
		p.seen[c] = true
		fits, known := s.fits[classStep{c, kind}]
		if !known {
			fits = s.b.Engine.CheckPredicates(pod, p.res.NewNodes[j]) == nil
			s.fits[classStep{c, kind}] = fits
		}
		if fits {
			p.feasible = append(p.feasible, j)
			p.key.WriteByte('|')
			p.key.WriteString(strconv.Itoa(c))
		}
		if len(p.seen) == len(p.members) {
			break // every class has its first node
		}
	}
}

// took records that node j took a pod of the kind (placed, to copy).
func (p *pass) took(j int, kind string, placed *v1.Pod) {
	s := p.s
	step := classStep{p.class[j], kind}
	if _, ok := p.sources[step]; !ok && placed != nil {
		p.sources[step] = placedAt{node: p.res.NewNodes[j], pod: placed}
	}
	next, ok := s.steps[step]
	if !ok {
		next = len(s.steps) + 1
		s.steps[step] = next
	}
	p.class[j] = next
	if p.members[step.class]--; p.members[step.class] == 0 {
		delete(p.members, step.class)
	}
	p.members[next]++
}

// SelectsNodesByName reports whether some pod's node selection names a
// node group or a node: alike groups then differ after all.
func SelectsNodesByName(pods []*v1.Pod) bool {
	names := func(key string) bool { return key == nodegroup.GroupLabel || key == v1.LabelHostname }
	for _, p := range pods {
		for k := range p.Spec.NodeSelector {
			if names(k) {
				return true
			}
		}
		a := p.Spec.Affinity
		if a == nil || a.NodeAffinity == nil {
			continue
		}
		na := a.NodeAffinity
		var terms []v1.NodeSelectorTerm
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		}
		for _, pt := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, pt.Preference)
		}
		for _, t := range terms {
			for _, r := range t.MatchExpressions {
				if names(r.Key) {
					return true
				}
			}
			if len(t.MatchFields) > 0 {
				return true
			}
		}
	}
	return false
}
