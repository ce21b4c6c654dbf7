package placement

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// PlaceBest schedules the pod as kube-scheduler would among the candidate
// nodes: every feasible node is scored by the profile's Score plugins and
// the pod goes to the highest. Where kube-scheduler picks at random among
// equal scores, this picks the first in candidate order, so results are
// reproducible. It evaluates every candidate; PlaceBestScanned stops as
// kube-scheduler does, at percentageOfNodesToScore.
func (eng *Engine) PlaceBest(pod *v1.Pod, candidates []string) (string, *v1.Pod, *FitError) {
	c, fitErr := eng.begin(pod, candidates)
	if c == nil {
		return "", nil, fitErr
	}
	var feasible []fwk.NodeInfo
	for _, name := range candidates {
		if rs := eng.filter(c, name); len(rs) > 0 {
			fitErr.PerNode[name] = rs
			continue
		}
		feasible = append(feasible, eng.snap.NodeInfo(name))
	}
	return eng.placeOnBest(c, feasible, fitErr)
}

// placeOnBest commits the pod to the highest-scoring feasible node, the
// next best when Reserve refuses it.
func (eng *Engine) placeOnBest(c *cycle, feasible []fwk.NodeInfo, fitErr *FitError) (string, *v1.Pod, *FitError) {
	for len(feasible) > 0 {
		best := eng.best(c, feasible)
		name := feasible[best].Node().Name
		placed, rs := eng.reserveAndCommit(c, name)
		if len(rs) == 0 {
			return name, placed, nil
		}
		fitErr.PerNode[name] = rs
		feasible = append(feasible[:best], feasible[best+1:]...)
	}
	return "", nil, fitErr
}

// best returns the index of the highest-scoring node, the first on ties.
func (eng *Engine) best(c *cycle, nodes []fwk.NodeInfo) int {
	best, _ := eng.scoreBest(c, nodes, false)
	return best
}

// scoreBest is best; with byState, ok is false (and nothing is chosen)
// when a Score plugin that reads more than the node's state is not
// skipped for the pod (chooseByState). Without a choice the first node
// is the answer, as the full path's.
func (eng *Engine) scoreBest(c *cycle, nodes []fwk.NodeInfo, byState bool) (best int, ok bool) {
	if len(nodes) == 1 || !eng.fw.HasScorePlugins() {
		return 0, true
	}
	// Scored nodes read only their own slices and those not local to one
	// node: NodeResourcesFit walks the slice list once per node scored,
	// which on a fleet of thousands was most of a burst's planning.
	eng.scored = eng.scored[:0]
	for _, n := range nodes {
		eng.scored = append(eng.scored, n.Node().Name)
	}
	eng.snap.SetCycleScope(c.pod.UID, eng.scored)
	defer eng.snap.ClearCycleScope()
	if st := eng.fw.RunPreScorePlugins(eng.context(), c.state, c.pod, nodes); !st.IsSuccess() {
		return 0, !byState
	}
	if byState {
		skipped := c.state.GetSkipScorePlugins()
		for _, p := range eng.fw.ListPlugins().Score.Enabled {
			if local, _ := stateScore(p.Name); !local && !skipped.Has(p.Name) {
				return 0, false
			}
		}
	}
	scores, st := eng.fw.RunScorePlugins(eng.context(), c.state, c.pod, nodes)
	if !st.IsSuccess() {
		return 0, !byState
	}
	for i := range scores {
		if scores[i].TotalScore > scores[best].TotalScore {
			best = i
		}
	}
	return best, true
}
