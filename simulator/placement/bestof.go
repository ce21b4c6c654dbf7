package placement

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// BestOf returns the index of the candidate PlaceBest would choose, for
// candidates the caller knows pass Filter for the pod (it saw the verdict
// on a node in the same state), without running Filter: PreFilter, then
// PreScore and Score over the candidates. ok is false when the scores
// need Filter's own output: the DynamicResources plugin scores a claim's
// firstAvailable choices from the allocation Filter made on each node,
// and VolumeBinding scores from the volumes Filter found; the caller then
// uses PlaceBest. Nothing is changed.
func (eng *Engine) BestOf(pod *v1.Pod, candidates []string) (best int, ok bool) {
	if len(candidates) == 1 {
		return 0, true
	}
	eng.snap.Fork() // template claims generated for PreFilter are not kept
	defer eng.snap.Revert()
	c, ferr := eng.preFilter(pod, candidates)
	if ferr != nil || !eng.scoresWithoutFilter(c.pod) {
		return 0, false
	}
	nodes := make([]fwk.NodeInfo, len(candidates))
	for i, name := range candidates {
		if nodes[i] = eng.snap.NodeInfo(name); nodes[i] == nil {
			return 0, false
		}
		if eng.verify {
			if rs := eng.filter(c, name); len(rs) > 0 {
				ShortcutDiffers("BestOf", "node %s was taken to pass Filter for pod %s, which rejects it: %v", name, podKey(pod), rs)
			}
		}
	}
	return eng.best(c, nodes), true
}

// scoresWithoutFilter reports whether no Score plugin reads what Filter
// wrote for the pod: it has no claim with firstAvailable requests and no
// persistent volume claims.
func (eng *Engine) scoresWithoutFilter(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	for _, c := range eng.ClaimsOf(pod) {
		for _, r := range c.Spec.Devices.Requests {
			if len(r.FirstAvailable) > 0 {
				return false
			}
		}
	}
	return true
}
