package placement

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Bounds of kube-scheduler's search for feasible nodes (pkg/scheduler,
// schedule_one.go: minFeasibleNodesToFind, minFeasibleNodesPercentageToFind).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// NodeScan is kube-scheduler's bounded search over a fleet: a pod's
// Filter stops once percentageOfNodesToScore of the nodes searched are
// found feasible, and the next pod's search starts after the last node
// this one examined. Upstream filters in parallel, so how far past the
// last feasible node it got is a race; here nodes are examined one by
// one, so the start of every search is reproducible.
type NodeScan struct {
	nodes  []string
	index  map[string]int
	next   int
	shared *sharedVerdicts
}

// NewNodeScan starts the searches of one pass over nodes, every node the
// scheduler would search, in the order it searches them.
func (eng *Engine) NewNodeScan(nodes []string) *NodeScan {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	return &NodeScan{nodes: nodes, index: index, shared: eng.newSharedVerdicts()}
}

// numFeasibleNodesToFind is how many feasible nodes the scheduler looks
// for among numAllNodes before it scores: all of a small cluster, else
// the profile's percentageOfNodesToScore (ParseProfile fills in the
// configuration's when the profile has none), or, when that is 0, 50%
// less a point per 125 nodes, never under 5% nor under 100 nodes. A
// profile without Score plugins takes the first feasible node.
func (eng *Engine) numFeasibleNodesToFind(numAllNodes int) int {
	if !eng.fw.HasScorePlugins() {
		return 1
	}
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	var percentage int
	if p := eng.profile.PercentageOfNodesToScore; p != nil {
		percentage = int(*p)
	}
	if percentage == 0 {
		percentage = max(50-numAllNodes/125, minFeasibleNodesPercentageToFind)
	}
	return max(numAllNodes*percentage/100, minFeasibleNodesToFind)
}

// PlaceBestScanned is PlaceBest with the scheduler's bound: candidates
// (nodes of the scan left in its order, the others known not to fit) are
// filtered from where the scan's previous search stopped, and only the
// first feasible ones the scheduler would find are scored. Nodes in one
// state share Filter's verdict and their scores where the search may be
// counted state by state (chooseByState).
// kind is the caller's key of what the scheduler reads of the pod ("":
// none), under which verdicts and choices are remembered.
func (eng *Engine) PlaceBestScanned(pod *v1.Pod, kind string, candidates []string, scan *NodeScan) (string, *v1.Pod, *FitError) {
	v := scan.shared
	choice, byState := eng.chooseByState(pod, kind, candidates, scan)
	if byState && !eng.verify {
		if placed := v.copyLearned(eng, pod, kind, choice); placed != nil {
			scan.next = (scan.next + choice.processed) % len(scan.nodes)
			return choice.node, placed, nil
		}
		if c, ok := choice.ch.filtered(choice.node); ok {
			// A pod of the kind placed before lends its scheduler pod
			// info, as PlaceOnAnyNodeLike's caller's does.
			eng.like = v.lastOf[kind]
			placed, rs := eng.reserveAndCommit(c, choice.node)
			eng.like = ""
			if len(rs) == 0 {
				scan.next = (scan.next + choice.processed) % len(scan.nodes)
				v.learn(eng, kind, choice.state, choice.node, placed)
				return choice.node, placed, nil
			}
		}
	}
	var copied []string
	copyTried := false
	if byState && eng.verify {
		copied, copyTried = v.copyOnFork(eng, pod, kind, choice)
	}
	next := scan.next
	node, placed, fitErr := eng.placeScanned(pod, candidates, scan)
	if byState && eng.verify {
		if node != choice.node || scan.next != (next+choice.processed)%len(scan.nodes) {
			ShortcutDiffers("states by position", "pod %s went to node %s and the search examined %d nodes; the scheduler's search goes to %s and examines %d",
				podKey(pod), choice.node, choice.processed, node, (scan.next-next+len(scan.nodes))%len(scan.nodes))
		}
		if copyTried && placed != nil {
			if got := eng.devicesOf(placed); !slices.Equal(got, copied) {
				ShortcutDiffers("learned copies", "pod %s copied onto node %s got devices %v; the scheduler's plugins give it %v", podKey(pod), node, copied, got)
			}
		}
		v.learn(eng, kind, choice.state, node, placed)
	}
	return node, placed, fitErr
}

// placeScanned is PlaceBestScanned's search node by node.
func (eng *Engine) placeScanned(pod *v1.Pod, candidates []string, scan *NodeScan) (string, *v1.Pod, *FitError) {
	c, fitErr := eng.begin(pod, candidates)
	if c == nil {
		return "", nil, fitErr
	}
	searched, index := scan.searched(c.filter)
	want := eng.numFeasibleNodesToFind(len(searched))
	start := 0
	if len(searched) > 0 {
		start = scan.next % len(searched)
	}
	processed := len(searched)
	var feasible []fwk.NodeInfo
	for _, name := range rotated(candidates, index, start) {
		if rs := eng.filter(c, name); len(rs) > 0 {
			fitErr.PerNode[name] = rs
			continue
		}
		feasible = append(feasible, eng.snap.NodeInfo(name))
		if len(feasible) == want {
			processed = (index[name]-start+len(searched))%len(searched) + 1
			break
		}
	}
	if len(scan.nodes) > 0 {
		scan.next = (scan.next + processed) % len(scan.nodes)
	}
	return eng.placeOnBest(c, feasible, fitErr)
}

// searched is what the scheduler searches for a pod: every node, or those
// of the PreFilter result, in the scan's order.
func (s *NodeScan) searched(res *fwk.PreFilterResult) ([]string, map[string]int) {
	if res == nil || res.AllNodes() {
		return s.nodes, s.index
	}
	var nodes []string
	index := map[string]int{}
	for _, n := range s.nodes {
		if res.NodeNames.Has(n) {
			index[n] = len(nodes)
			nodes = append(nodes, n)
		}
	}
	return nodes, index
}

// rotated orders candidates (in search order) as a search starting at
// position start meets them; candidates not searched come last, where
// Filter rejects them.
func rotated(candidates []string, index map[string]int, start int) []string {
	out := make([]string, 0, len(candidates))
	var before, outside []string
	for _, n := range candidates {
		switch i, ok := index[n]; {
		case !ok:
			outside = append(outside, n)
		case i < start:
			before = append(before, n)
		default:
			out = append(out, n)
		}
	}
	return append(append(out, before...), outside...)
}
