package placement

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// sharedVerdicts lets one scheduling cycle over a fleet judge each node
// state once (nodeStates): nodes in one state pass or fail Filter alike
// and score alike, so Filter runs on the first node of each state the
// search meets and the others take its verdict, and only those first
// nodes are scored. A fleet of a thousand nodes with free GPUs is then a
// few states, not a thousand allocator runs, per pod.
//
// A cycle shares verdicts when statesExact holds, every Score plugin
// scores by the node's state alone or is skipped for the pod, no placed
// pod has inter-pod (anti-)affinity, and the pod is eligible as for
// StateCopies (extended resources allowed), prefers no node by name and
// has only unallocated claims: Filter then allocates its devices afresh
// on each node.
type sharedVerdicts struct {
	// states is nil where the profile or the snapshot rule sharing out.
	states *nodeStates
	// on says the current cycle, of pod, shares verdicts.
	on  bool
	pod *v1.Pod
	// verdicts are this cycle's, by state: the reasons of the node
	// Filter ran on (nil: it passed).
	verdicts map[string][]Reason
	// filtered are the nodes Filter ran on this cycle: only they hold
	// what Filter wrote for Reserve and Score (the DynamicResources
	// plugin's allocation).
	filtered map[string]bool
	// index is where each state lies in the scan (chooseByState);
	// verdictOf and choiceOf are its memos, by kind and state(s).
	index     stateIndex
	verdictOf map[string]bool
	choiceOf  map[string]int
	// lastOf is the last pod of each kind placed by state; learned are
	// placements by kind and state, copied (learnedCopies); copied counts
	// the copies (under the switch, those held to the plugins).
	lastOf  map[string]types.UID
	learned map[string]learnedPlacement
	copied  int
	// hits counts the verdicts taken from a node in the same state.
	hits   int
	keyBuf []string
	repBuf []fwk.NodeInfo
}

func (eng *Engine) newSharedVerdicts() *sharedVerdicts {
	v := &sharedVerdicts{verdicts: map[string][]Reason{}, filtered: map[string]bool{},
		verdictOf: map[string]bool{}, choiceOf: map[string]int{}, lastOf: map[string]types.UID{},
		learned: map[string]learnedPlacement{}}
	if eng.statesExact() && eng.scoresByState() {
		v.states = newNodeStates(eng, eng.scoresImages())
	}
	return v
}

// stateScore says whether a Score plugin scores a pod eligible for shared
// verdicts by the node's state alone (local), or only when its PreScore
// skips it for the pod (skippable). VolumeBinding scores only the volumes
// its Filter found, and an eligible pod has no volume claims: 0 on every
// node.
func stateScore(plugin string) (local, skippable bool) {
	switch plugin {
	case names.NodeResourcesFit, names.NodeResourcesBalancedAllocation, names.TaintToleration,
		names.NodeAffinity, names.ImageLocality, names.DynamicResources, names.VolumeBinding,
		"DraxrNodeResourcesFit", "DraxrNodeResourcesBalancedAllocation", "DraxrDynamicResources":
		return true, false
	case names.PodTopologySpread, names.InterPodAffinity:
		return false, true
	}
	return false, false
}

// scoresByState reports whether every Score plugin of the profile is one
// stateScore knows.
func (eng *Engine) scoresByState() bool {
	for _, p := range eng.fw.ListPlugins().Score.Enabled {
		if local, skippable := stateScore(p.Name); !local && !skippable {
			return false
		}
	}
	return true
}

// scoresImages reports whether ImageLocality scores: nodes then share a
// state only with the same images.
func (eng *Engine) scoresImages() bool {
	return slices.ContainsFunc(eng.fw.ListPlugins().Score.Enabled, func(p config.Plugin) bool { return p.Name == names.ImageLocality })
}

// begin says whether the cycle shares verdicts, and forgets the last
// cycle's.
func (v *sharedVerdicts) begin(eng *Engine, c *cycle) bool {
	clear(v.verdicts)
	clear(v.filtered)
	v.pod = c.pod
	v.on = v.states != nil && eligible(c.pod, true, true) && eng.noInterPodTerms() && eng.claimsUnallocated(c.pod)
	return v.on
}

// key is the node's state, "" when it shares nothing.
func (v *sharedVerdicts) key(name string) string {
	if !v.on {
		return ""
	}
	k := v.states.Key(name)
	if k == "" || selectsByName(v.pod, v.states.class[name]) {
		return ""
	}
	return k
}

// claimsUnallocated reports whether no claim of the pod is allocated: an
// allocated claim's node selector names nodes.
func (eng *Engine) claimsUnallocated(pod *v1.Pod) bool {
	for _, c := range eng.ClaimsOf(pod) {
		if c.Status.Allocation != nil {
			return false
		}
	}
	return true
}

// filterShared is filter, with the verdict of the node's state when a
// node in it was filtered this cycle.
func (eng *Engine) filterShared(c *cycle, v *sharedVerdicts, name string) []Reason {
	key := v.key(name)
	if rs, ok := v.verdicts[key]; ok && key != "" {
		v.hits++
		if eng.verify {
			if full := eng.filter(c, name); (len(full) == 0) != (len(rs) == 0) {
				ShortcutDiffers("shared verdicts", "pod %s on node %s took the verdict %v of its state %q; the scheduler's plugins give %v",
					podKey(c.pod), name, rs, key, full)
			}
			v.filtered[name] = true
		}
		return rs
	}
	rs := eng.filter(c, name)
	v.filtered[name] = true
	if key != "" {
		v.verdicts[key] = rs
	}
	return rs
}

// placeOnBestShared is placeOnBest scoring one node per state: the first
// feasible node of each, which Filter ran on. The full path takes the
// first of the highest scores, and a state's nodes score alike, so that
// is the first node of the best state. When a plugin that reads more than
// the node's state is not skipped, or Reserve refuses the node, the full
// path runs over every feasible node. The node is "" when none takes the
// pod (the reasons are in fitErr).
func (eng *Engine) placeOnBestShared(c *cycle, v *sharedVerdicts, feasible []fwk.NodeInfo, fitErr *FitError) (string, *v1.Pod) {
	best, ok := eng.bestByState(c, v, feasible)
	if ok && eng.verify {
		if full := eng.best(c, feasible); feasible[full].Node().Name != feasible[best].Node().Name {
			ShortcutDiffers("shared verdicts", "pod %s went to node %s by its state's score; the scheduler's scores choose %s",
				podKey(c.pod), feasible[best].Node().Name, feasible[full].Node().Name)
		}
	}
	if ok {
		name := feasible[best].Node().Name
		placed, rs := eng.reserveAndCommit(c, name)
		if len(rs) == 0 {
			return name, placed
		}
		fitErr.PerNode[name] = rs
		feasible = append(feasible[:best:best], feasible[best+1:]...)
	}
	name, placed, _ := eng.placeOnBest(c, eng.filterAll(c, v, feasible, fitErr), fitErr)
	return name, placed
}

// maxReps bounds the states a search counted state by state filters:
// past it PreFilter for every candidate costs little more.
const maxReps = 64

// bestByState returns the index of the node placeOnBest would choose
// among feasible, scoring the first node of each state only; ok is false
// when the scores may read more than the node's state.
func (eng *Engine) bestByState(c *cycle, v *sharedVerdicts, feasible []fwk.NodeInfo) (int, bool) {
	if len(feasible) == 0 {
		return 0, false
	}
	if !eng.fw.HasScorePlugins() {
		return 0, true
	}
	v.keyBuf, v.repBuf = v.keyBuf[:0], v.repBuf[:0]
	var at []int
	for i, ni := range feasible {
		k := v.key(ni.Node().Name)
		if k == "" {
			k = "\x00" + ni.Node().Name // a state of its own, filtered
		}
		if !slices.Contains(v.keyBuf, k) {
			v.keyBuf, v.repBuf, at = append(v.keyBuf, k), append(v.repBuf, ni), append(at, i)
		}
	}
	if len(v.repBuf) == 1 {
		return 0, true // every node scores alike: the first
	}
	eng.scored = eng.scored[:0]
	for _, n := range v.repBuf {
		eng.scored = append(eng.scored, n.Node().Name)
	}
	eng.snap.SetCycleScope(c.pod.UID, eng.scored)
	defer eng.snap.ClearCycleScope()
	if st := eng.fw.RunPreScorePlugins(eng.context(), c.state, c.pod, v.repBuf); !st.IsSuccess() {
		return 0, false
	}
	skipped := c.state.GetSkipScorePlugins()
	for _, p := range eng.fw.ListPlugins().Score.Enabled {
		if local, _ := stateScore(p.Name); !local && !skipped.Has(p.Name) {
			return 0, false
		}
	}
	scores, st := eng.fw.RunScorePlugins(eng.context(), c.state, c.pod, v.repBuf)
	if !st.IsSuccess() {
		return 0, false
	}
	best := 0
	for i := range scores {
		if scores[i].TotalScore > scores[best].TotalScore {
			best = i
		}
	}
	return at[best], true
}

// filterAll runs Filter on the feasible nodes that took their state's
// verdict, for the full path, and keeps those that pass.
func (eng *Engine) filterAll(c *cycle, v *sharedVerdicts, feasible []fwk.NodeInfo, fitErr *FitError) []fwk.NodeInfo {
	return slices.DeleteFunc(feasible, func(ni fwk.NodeInfo) bool {
		name := ni.Node().Name
		if v.filtered[name] {
			return false
		}
		v.filtered[name] = true
		if rs := eng.filter(c, name); len(rs) > 0 {
			fitErr.PerNode[name] = rs
			return true
		}
		return false
	})
}
