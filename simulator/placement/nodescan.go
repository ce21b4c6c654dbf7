package placement

import (
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
// state share Filter's verdict and their scores (sharedVerdicts); when
// they may, PreFilter is run for the first node of each state alone, and
// the cycle is run again for every candidate if that is not enough.
func (eng *Engine) PlaceBestScanned(pod *v1.Pod, candidates []string, scan *NodeScan) (string, *v1.Pod, *FitError) {
	if reps := scan.shared.reps(eng, pod, candidates, scan); reps != nil {
		if node, placed, fitErr, ok := eng.placeScanned(pod, candidates, reps, scan); ok {
			return node, placed, fitErr
		}
	}
	node, placed, fitErr, _ := eng.placeScanned(pod, candidates, nil, scan)
	return node, placed, fitErr
}

// placeScanned is one cycle of PlaceBestScanned, its PreFilter run for
// reps when given (else for every candidate). ok is false when reps were
// not enough: a node outside them needed Filter of its own, and the cycle
// was given up with nothing changed.
func (eng *Engine) placeScanned(pod *v1.Pod, candidates, reps []string, scan *NodeScan) (string, *v1.Pod, *FitError, bool) {
	scoped := reps != nil
	scope := candidates
	if scoped {
		scope = reps
	}
	c, fitErr := eng.begin(pod, scope)
	if c == nil {
		return "", nil, fitErr, !scoped
	}
	shared := scan.shared.begin(eng, c)
	if scoped && (!shared || c.filter != nil && !c.filter.AllNodes()) {
		return "", nil, nil, false
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
		if rs := eng.filterShared(c, scan.shared, name); len(rs) > 0 {
			fitErr.PerNode[name] = rs
			continue
		}
		feasible = append(feasible, eng.snap.NodeInfo(name))
		if len(feasible) == want {
			processed = (index[name]-start+len(searched))%len(searched) + 1
			break
		}
	}
	var node string
	var placed *v1.Pod
	if shared {
		var ok bool
		if node, placed, ok = eng.placeOnBestShared(c, scan.shared, feasible, fitErr, scoped); !ok {
			return "", nil, nil, false
		}
	} else {
		node, placed, fitErr = eng.placeOnBest(c, feasible, fitErr)
	}
	if len(scan.nodes) > 0 {
		scan.next = (scan.next + processed) % len(scan.nodes)
	}
	if placed == nil {
		return "", nil, fitErr, true
	}
	return node, placed, nil, true
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
