package placement

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// StateCopies copies placements between nodes in the same state
// (nodeStates): a pod of a kind that was placed on a node in some state
// goes, onto another node in that state, where it went there, with the
// devices renamed (as Replicate does for empty nodes).
//
// It is for one run in which nodes and slices do not change but for nodes
// removed (a scale-down search). It is exact under preconditions checked
// here: statesExact; no placed pod has inter-pod (anti-)affinity; the pod
// is Eligible; its claims are its own and fresh; the copied allocation
// holds only devices of the node's own pool, whole. The caller keys pods
// by kind (estimator.Kinds), as Replicate's callers do.
type StateCopies struct {
	*nodeStates
	memo   map[string]map[string]*placedCopy // kind -> state -> copy
	copied int
}

// Copied counts the placements copied.
func (c *StateCopies) Copied() int { return c.copied }

// placedCopy is what placing a pod wrote of its claims on node.
type placedCopy struct {
	node   string
	allocs []*resourceapi.AllocationResult // by spec.resourceClaims index
}

// copyFilter says whether a PreFilter, Filter or Reserve plugin's verdict
// for an eligible pod reads only the node's state as StateCopies keys it,
// and whether placeCopy writes its Reserve as commit does.
func copyFilter(plugin string) bool {
	switch plugin {
	case names.NodeName, names.NodeUnschedulable, names.TaintToleration, names.NodeAffinity,
		names.NodePorts, names.NodeResourcesFit, names.VolumeRestrictions, names.NodeVolumeLimits,
		names.VolumeBinding, names.VolumeZone, names.PodTopologySpread, names.InterPodAffinity,
		names.DynamicResources, names.NodeDeclaredFeatures,
		"DraxrDynamicResources", "DraxrNodeResourcesFit":
		return true
	}
	return false
}

// NewStateCopies returns the copier for the snapshot as it is, or nil when
// copies could not be exact (see StateCopies).
func (eng *Engine) NewStateCopies() *StateCopies {
	if !eng.statesExact() || !eng.noInterPodTerms() {
		return nil
	}
	return &StateCopies{nodeStates: newNodeStates(eng, false), memo: map[string]map[string]*placedCopy{}}
}

// Eligible reports whether the pod's placements may be copied (see
// StateCopies); ownNamed as for Replicable. Any resource outside the
// kubernetes.io domain counts as extended.
func Eligible(pod *v1.Pod, ownNamed bool) bool { return eligible(pod, ownNamed, false) }

// eligible is Eligible, with extended resources allowed when extended is
// set: they may be copied nowhere, but nodes in one state judge them alike.
func eligible(pod *v1.Pod, ownNamed, extended bool) bool {
	if !Replicable(pod, ownNamed) || pod.Spec.Resources != nil || pod.Spec.SchedulingGroup != nil || pod.Spec.NodeName != "" {
		return false
	}
	for name := range pod.Spec.Overhead {
		if !v1helper.IsNativeResource(name) {
			return false
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, p := range cs[i].Ports {
				if p.HostPort != 0 {
					return false
				}
			}
			for _, rl := range []v1.ResourceList{cs[i].Resources.Requests, cs[i].Resources.Limits} {
				for name := range rl {
					if !extended && !v1helper.IsNativeResource(name) {
						return false
					}
				}
			}
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i].VolumeSource
		if v.EmptyDir == nil && v.ConfigMap == nil && v.Secret == nil && v.Projected == nil && v.DownwardAPI == nil {
			return false
		}
	}
	for _, t := range nodeSelectorTerms(pod) {
		if len(t.MatchFields) > 0 {
			return false
		}
	}
	return true
}

// nodeSelectorTerms are the pod's node affinity terms, required and
// preferred: the node names they read change Filter's verdict or the
// scores.
func nodeSelectorTerms(pod *v1.Pod) []v1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var terms []v1.NodeSelectorTerm
	if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		terms = append(terms, r.NodeSelectorTerms...)
	}
	for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, p.Preference)
	}
	return terms
}

// selectsByName reports whether the pod selects or prefers nodes by a
// label whose value is the node's name in its class.
func selectsByName(pod *v1.Pod, cl *nodeClass) bool {
	if len(cl.nameKeys) == 0 {
		return false
	}
	for k := range pod.Spec.NodeSelector {
		if slices.Contains(cl.nameKeys, k) {
			return true
		}
	}
	for _, t := range nodeSelectorTerms(pod) {
		for _, r := range t.MatchExpressions {
			if slices.Contains(cl.nameKeys, r.Key) {
				return true
			}
		}
	}
	return false
}

// Place copies onto node the placement a pod of the kind got on a node in
// the state key (Key, read before any change), if one was learned; it
// returns the placed pod, or nil and changes nothing. The pod must be
// Eligible and pending.
func (c *StateCopies) Place(pod *v1.Pod, kind, key, node string) *v1.Pod {
	if key == "" || selectsByName(pod, c.class[node]) {
		return nil
	}
	src := c.memo[kind][key]
	if src == nil || len(src.allocs) != len(pod.Spec.ResourceClaims) {
		return nil
	}
	var want []string
	fits := false
	if c.eng.verify {
		want, fits = c.eng.verifyStateCopy(pod, node)
	}
	c.eng.snap.Fork()
	placed := c.eng.placeCopy(pod, src, node)
	if placed == nil {
		c.eng.snap.Revert()
		return nil // the full path runs instead
	}
	c.eng.snap.Commit()
	c.copied++
	if c.eng.verify {
		if !fits {
			ShortcutDiffers("state copy", "pod %s was copied onto node %s, which the scheduler's plugins reject", podKey(pod), node)
		}
		if got := c.eng.devicesOf(placed); !slices.Equal(got, want) {
			ShortcutDiffers("state copy", "pod %s was copied onto node %s with devices %v, the scheduler's plugins give it %v", podKey(pod), node, got, want)
		}
	}
	return placed
}

// Learn records where the scheduler's plugins placed a pod of the kind on
// node, whose state before was key, for Place to copy.
func (c *StateCopies) Learn(pod *v1.Pod, kind, key, node string) {
	if key == "" || selectsByName(pod, c.class[node]) {
		return
	}
	src := &placedCopy{node: node}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			return
		}
		claim := c.eng.snap.ResourceClaim(pod.Namespace, *name)
		if claim == nil || claim.Status.Allocation == nil {
			return
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Pool != node || r.ShareID != nil {
				return
			}
		}
		src.allocs = append(src.allocs, claim.Status.Allocation)
	}
	if c.eng.findExtendedResourceClaim(pod) != nil {
		return
	}
	if c.memo[kind] == nil {
		c.memo[kind] = map[string]*placedCopy{}
	}
	c.memo[kind][key] = src
}

// placeCopy writes what committing the pod on node would: each claim,
// fresh, gets the source's allocation moved to the node, the finalizer
// the DynamicResources plugin's Reserve adds, and the pod's reservation.
func (eng *Engine) placeCopy(pod *v1.Pod, src *placedCopy, node string) *v1.Pod {
	copied := *pod
	placed := &copied
	placed.Spec.NodeName = node
	placed.Status.ExtendedResourceClaimStatus = nil
	for i := range placed.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(placed, &placed.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			return nil
		}
		stored := eng.snap.ResourceClaim(placed.Namespace, *name)
		if stored == nil || stored.Status.Allocation != nil || len(stored.Status.ReservedFor) > 0 || stored.DeletionTimestamp != nil {
			return nil
		}
		alloc, err := moveAllocation(src.allocs[i], src.node, node, [2]string{placed.Namespace, *name})
		if err != nil {
			return nil
		}
		claim := statusCopy(stored)
		claim.Status.Allocation = alloc
		if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
			claim.Finalizers = append(slices.Clip(claim.Finalizers), resourceapi.Finalizer)
		}
		reserveFor(claim, placed)
		eng.snap.SetResourceClaim(claim)
	}
	if err := eng.snap.AddPod(placed); err != nil {
		return nil
	}
	return placed
}

// verifyStateCopy places the pod on node through the scheduler's plugins
// on a fork, undone, and returns its devices and whether it fits.
func (eng *Engine) verifyStateCopy(pod *v1.Pod, node string) ([]string, bool) {
	eng.snap.Fork()
	defer eng.snap.Revert()
	placed, ferr := eng.Place(pod, node)
	if ferr != nil {
		return nil, false
	}
	return eng.devicesOf(placed), true
}

func pluginNames(ps []config.Plugin) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
