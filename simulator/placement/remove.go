package placement

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// Remove takes a placed pod off its node and frees what it holds, as
// evicting it and recreating it elsewhere would: its extended-resource
// claim is deleted, claims it owns are deallocated, and shared claims drop
// their reservation for it (and their allocation once nobody holds them).
// It returns the pod as pending, ready to be placed again.
func (eng *Engine) Remove(uid types.UID) (*v1.Pod, error) {
	pod, _, ok := eng.snap.Pod(uid)
	if !ok {
		return nil, fmt.Errorf("pod with uid %q is not placed", uid)
	}
	if xr := eng.findExtendedResourceClaim(pod); xr != nil {
		eng.snap.DeleteResourceClaim(xr.Namespace, xr.Name)
	}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		stored := eng.snap.ResourceClaim(pod.Namespace, *name)
		if stored == nil {
			continue
		}
		claim := statusCopy(stored)
		claim.Status.ReservedFor = withoutConsumer(claim.Status.ReservedFor, pod.UID)
		if ownedBy(claim, pod) || len(claim.Status.ReservedFor) == 0 {
			claim.Status.Allocation = nil
			claim.Status.ReservedFor = nil
		}
		eng.snap.SetResourceClaim(claim)
	}
	if err := eng.snap.RemovePod(uid); err != nil {
		return nil, err
	}
	// A shallow copy, as commit makes: only top-level fields change, and
	// pods handed to the placement engine are never modified in place.
	pending := *pod
	pending.Spec.NodeName = ""
	pending.Status.ExtendedResourceClaimStatus = nil
	return &pending, nil
}

// statusCopy copies a stored claim for a new status: the snapshot's
// objects are never modified in place, so only what the caller changes is
// copied (the status, and the reservations it appends to), not the
// metadata and spec a deep copy would allocate again for every move.
func statusCopy(claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c := *claim
	c.Status.ReservedFor = slices.Clone(claim.Status.ReservedFor)
	return &c
}

// findExtendedResourceClaim finds a pod's extended-resource claim by its
// status, or by the annotation and controller reference as the scheduler does.
func (eng *Engine) findExtendedResourceClaim(pod *v1.Pod) *resourceapi.ResourceClaim {
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		if c := eng.snap.ResourceClaim(pod.Namespace, st.ResourceClaimName); c != nil {
			return c
		}
	}
	if c := eng.snap.ExtendedResourceClaimOf(pod.UID); c != nil && c.Namespace == pod.Namespace {
		return c
	}
	return nil
}

func ownedBy(claim *resourceapi.ResourceClaim, pod *v1.Pod) bool {
	return controlledBy(claim, pod.UID)
}

func controlledBy(claim *resourceapi.ResourceClaim, owner types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(claim)
	return ref != nil && ref.UID == owner
}

func withoutConsumer(refs []resourceapi.ResourceClaimConsumerReference, uid types.UID) []resourceapi.ResourceClaimConsumerReference {
	var out []resourceapi.ResourceClaimConsumerReference
	for _, r := range refs {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	return out
}

// ClaimsOf returns the claims a pod holds: its extended-resource claim and
// the claims in spec.resourceClaims that exist.
func (eng *Engine) ClaimsOf(pod *v1.Pod) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	if xr := eng.findExtendedResourceClaim(pod); xr != nil {
		out = append(out, xr)
	}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		if c := eng.snap.ResourceClaim(pod.Namespace, *name); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// OnOwnPools reports whether every device the placed pod holds is in node's
// own pool: only then is its placement the same on any fresh node of the
// group, since a shared pool (all nodes, a node selector) drains from every
// node.
func (eng *Engine) OnOwnPools(pod *v1.Pod, node string) bool {
	for _, c := range eng.ClaimsOf(pod) {
		if a := c.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if r.Pool != node {
					return false
				}
			}
		}
	}
	return true
}
