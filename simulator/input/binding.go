package input

import (
	"cmp"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodsInBinding returns the pods the scheduler is binding, by UID, read
// from the claims: a claim allocated and reserved for the pod, or an
// extended-resource claim the pod owns; the value is the node the claim's
// devices are allocated on ("" when not known yet). The scheduler's
// PreBind creates that claim, allocates and reserves it, and only then
// records it in the pod's status, so the pod's status alone misses the
// pods in between; with the scheduler's API calls throttled, hundreds of
// pods of one scale-up sit there at once. Their Unschedulable condition is
// stale. Planned again, such a pod fits nowhere (its claim already asks
// for devices) and, worse, the planner takes that as "no existing node
// fits this kind of pod", so its siblings would all be planned on new
// nodes.
// Claims whose device binding failed (KEP-5007) bind nothing: callers
// drop them first (DropFailedBindings).
func PodsInBinding(claims []*resourceapi.ResourceClaim) map[types.UID]string {
	// Sized for a pod a claim, the common case: grown one entry at a
	// time, a fleet's 20,000 claims rehashed it a dozen times a loop.
	out := make(map[types.UID]string, len(claims))
	// inBinding records a pod; a node already found for it stays.
	inBinding := func(uid types.UID, node string) {
		if prev, ok := out[uid]; !ok || prev == "" && node != "" {
			out[uid] = node
		}
	}
	for _, c := range claims {
		node := allocatedNode(c.Status.Allocation)
		if c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
			if ref := metav1.GetControllerOfNoCopy(c); ref != nil && ref.Kind == "Pod" {
				inBinding(ref.UID, node)
			}
		}
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.APIGroup == "" {
				inBinding(r.UID, node)
			}
		}
	}
	return out
}

// allocatedNode is the node an allocation's devices are on: the
// allocator's node selector names it (metadata.name In [node]); ""
// for devices reachable from several nodes.
func allocatedNode(a *resourceapi.AllocationResult) string {
	if a == nil || a.NodeSelector == nil {
		return ""
	}
	for _, t := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == v1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// BeingBound reports a pod the scheduler has placed but not yet bound: its
// extended-resource claim is recorded in its status, or a claim is
// allocated and reserved for it or owned by it (inBinding).
func BeingBound(inBinding map[types.UID]string, p *v1.Pod) bool {
	if p.Status.ExtendedResourceClaimStatus != nil && p.Status.ExtendedResourceClaimStatus.ResourceClaimName != "" {
		return true
	}
	_, ok := inBinding[p.UID]
	return ok
}

// AssumedNode is the node the scheduler is binding p to, as it assumes
// it: where its claims' devices are allocated, or else the
// nominatedNodeName the scheduler sets for that purpose before a long
// PreBind; "" when p is not being bound or the node is not known yet.
func AssumedNode(inBinding map[types.UID]string, p *v1.Pod) string {
	if !BeingBound(inBinding, p) || p.Spec.NodeName != "" {
		return ""
	}
	return cmp.Or(inBinding[p.UID], p.Status.NominatedNodeName)
}

// PlaceBindingPods does with the pending pods what the autoscaler's loop
// does: a pod being bound runs on the node the scheduler is binding it to,
// as the scheduler assumes it, and one whose node is not known yet is not
// planned (the scheduler has placed it). Without this, a dump taken
// during a scale-up plans those pods again, on new nodes. Moved pods are
// copies; it returns how many pods it took out of PendingPods.
func (o *Objects) PlaceBindingPods() int {
	wait := DefaultBindingWait()
	o.ResourceClaims = DropFailedBindings(o.ResourceClaims, wait)
	inBinding := PodsInBinding(o.ResourceClaims)
	if len(inBinding) == 0 {
		return 0
	}
	nodes := make(map[string]bool, len(o.Nodes))
	for _, n := range o.Nodes {
		nodes[n.Name] = true
	}
	pending := o.PendingPods[:0]
	for _, p := range o.PendingPods {
		if SimulateFiling(ClassifyPod(p, inBinding)) != OnAssumedNode {
			pending = append(pending, p)
			continue
		}
		if node := AssumedNode(inBinding, p); nodes[node] {
			assumed := *p
			assumed.Spec.NodeName = node
			o.RunningPods = append(o.RunningPods, &assumed)
		}
	}
	moved := len(o.PendingPods) - len(pending)
	clear(o.PendingPods[len(pending):])
	o.PendingPods = pending
	return moved
}
