package placement

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// sharedVerdicts is what a scan keeps to judge each node state once
// (nodeStates, chooseByState): nodes in one state pass or fail Filter
// alike and score alike, so Filter runs on the first node of each state a
// search meets and only those nodes are scored. A fleet of a thousand
// nodes with free GPUs is then a few states, not a thousand allocator
// runs, per pod.
//
// Verdicts are shared when statesExact holds, every Score plugin scores
// by the node's state alone or is skipped for the pod, no placed pod has
// inter-pod (anti-)affinity, and the pod is eligible as for StateCopies
// (extended resources allowed), prefers no node by name and has only
// unallocated claims: Filter then allocates its devices afresh on each
// node.
type sharedVerdicts struct {
	// states is nil where the profile or the snapshot rule sharing out.
	states *nodeStates
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
	// hits counts the nodes judged by another node in their state.
	hits int
}

func (eng *Engine) newSharedVerdicts() *sharedVerdicts {
	v := &sharedVerdicts{filtered: map[string]bool{},
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

// maxReps bounds the states a search counted state by state filters:
// past it PreFilter for every candidate costs little more.
const maxReps = 64
