package placement

import (
	v1 "k8s.io/api/core/v1"
)

// learnedPlacement is where the scheduler's plugins placed a pod of some
// kind on a node in some state: the pod as placed, its claims allocated.
type learnedPlacement struct {
	node string
	pod  *v1.Pod
}

// learn records, for the search by state (chooseByState), where a pod of
// the kind went on a node that was in state before: a later pod of the
// kind chosen for a node in that state is placed there by copy
// (replicateOne, as Replicate does for fresh nodes), with the devices
// renamed, without PreFilter, Filter and Reserve. The allocator is
// deterministic and the state names the node's shape and which of its
// devices are taken, so the plugins would give the same devices there.
// Only placements that hold whole devices of the node's own pool are
// learned.
func (v *sharedVerdicts) learn(eng *Engine, kind, state, node string, placed *v1.Pod) {
	if placed == nil || kind == "" {
		return
	}
	v.lastOf[kind] = placed.UID
	if state == "" || state[0] == 0 {
		return
	}
	for _, c := range eng.ClaimsOf(placed) {
		if a := c.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if r.Pool != node || r.ShareID != nil {
					return
				}
			}
		}
	}
	v.learned[kind+"\x00"+state] = learnedPlacement{node: node, pod: placed}
}

// source is the learned placement for the kind in state, if its pod is
// still placed where it was.
func (v *sharedVerdicts) source(eng *Engine, kind, state string) (learnedPlacement, bool) {
	if kind == "" {
		return learnedPlacement{}, false
	}
	key := kind + "\x00" + state
	src, ok := v.learned[key]
	if !ok {
		return learnedPlacement{}, false
	}
	if _, node, placed := eng.snap.Pod(src.pod.UID); !placed || node != src.node {
		delete(v.learned, key)
		return learnedPlacement{}, false
	}
	return src, true
}

// copyLearned places pod on the chosen node by copying the learned
// placement for its kind in the node's state; nil when there is none or
// it does not apply (nothing changed then).
func (v *sharedVerdicts) copyLearned(eng *Engine, pod *v1.Pod, kind string, choice stateChoice) *v1.Pod {
	src, ok := v.source(eng, kind, choice.state)
	if !ok {
		return nil
	}
	eng.snap.Fork()
	placed := &v1.Pod{}
	if err := eng.replicateOne(src.node, src.pod, choice.node, pod, placed); err != nil {
		eng.snap.Revert()
		return nil
	}
	eng.snap.Commit()
	v.copied++
	v.lastOf[kind] = placed.UID
	return placed
}

// copyOnFork is copyLearned undone: the devices the copy gives, for the
// verify switch to hold them to the plugins'.
func (v *sharedVerdicts) copyOnFork(eng *Engine, pod *v1.Pod, kind string, choice stateChoice) ([]string, bool) {
	src, ok := v.source(eng, kind, choice.state)
	if !ok {
		return nil, false
	}
	eng.snap.Fork()
	defer eng.snap.Revert()
	placed := &v1.Pod{}
	if err := eng.replicateOne(src.node, src.pod, choice.node, pod, placed); err != nil {
		return nil, false
	}
	v.copied++
	return eng.devicesOf(placed), true
}
