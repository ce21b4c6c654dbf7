package placement

import (
	"fmt"
	"slices"

	"github.com/google/uuid"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// Replicate places pods on dstNode exactly as srcPods (placed pods, in
// placement order) were placed on srcNode, without running the plugins.
// It is for identical fresh nodes of one template: the allocator is
// deterministic, so placing equivalent pods in the same order on an
// identical empty node yields the same devices, with the node's name and
// pool in place of the source's. The caller guarantees that dstNode is
// empty and identical to what srcNode was, that pods[i] is equivalent to
// srcPods[i], and that no pod has inter-pod constraints or shared claims.
// On error nothing is placed.
func (eng *Engine) Replicate(srcNode string, srcPods []*v1.Pod, dstNode string, pods []*v1.Pod) error {
	if len(srcPods) != len(pods) {
		return fmt.Errorf("replicate: %d source pods for %d pods", len(srcPods), len(pods))
	}
	if eng.verify {
		eng.verifyReplicate(srcNode, srcPods, dstNode, pods)
	}
	eng.snap.Fork()
	if err := eng.replicateAll(srcNode, srcPods, dstNode, pods); err != nil {
		eng.snap.Revert()
		return err
	}
	eng.snap.Commit()
	return nil
}

func (eng *Engine) replicateAll(srcNode string, srcPods []*v1.Pod, dstNode string, pods []*v1.Pod) error {
	// One array for the node's placed pods: a scale-up of thousands of
	// pods copies every one of them.
	placed := make([]v1.Pod, len(pods))
	for i, src := range srcPods {
		if err := eng.replicateOne(srcNode, src, dstNode, pods[i], &placed[i]); err != nil {
			return err
		}
	}
	return nil
}

// replicateOne places a copy of pod, written to placed, as src was placed.
func (eng *Engine) replicateOne(srcNode string, src *v1.Pod, dstNode string, pod, placed *v1.Pod) error {
	pod, err := eng.ensureTemplateClaims(pod)
	if err != nil {
		return err
	}
	*placed = *pod
	placed.Spec.NodeName = dstNode
	placed.Status.ExtendedResourceClaimStatus = nil

	if xr := eng.snap.ExtendedResourceClaimOf(src.UID); xr != nil {
		alloc, err := moveAllocation(xr.Status.Allocation, srcNode, dstNode, [2]string{string(placed.UID), "extended"})
		if err != nil {
			return err
		}
		// The source's claim with this pod's name, owner and allocation:
		// a shallow copy, as statusCopy (its spec and labels are shared,
		// never modified in place). Its reservations are replaced
		// (extendedResourceClaim), so they are not copied; its
		// finalizers only when one is to be added.
		copied := *xr
		claim := &copied
		claim.Status.Allocation = alloc
		claim.Status.ReservedFor = nil
		if !slices.Contains(xr.Finalizers, resourceapi.Finalizer) {
			claim.Finalizers = slices.Clone(xr.Finalizers)
		}
		claim.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: placed.Name, UID: placed.UID, Controller: ptr.To(true),
		}}
		claim = eng.extendedResourceClaim(placed, claim)
		placed.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
			ResourceClaimName: claim.Name,
			RequestMappings:   src.Status.ExtendedResourceClaimStatus.RequestMappings,
		}
		eng.snap.SetResourceClaim(claim)
	}
	for i := range placed.Spec.ResourceClaims {
		srcName, _, err1 := resourceclaim.Name(src, &src.Spec.ResourceClaims[i])
		name, _, err2 := resourceclaim.Name(placed, &placed.Spec.ResourceClaims[i])
		if err1 != nil || err2 != nil || srcName == nil || name == nil {
			return fmt.Errorf("replicate pod %s: claim %d has no name", podKey(placed), i)
		}
		srcClaim, stored := eng.snap.ResourceClaim(src.Namespace, *srcName), eng.snap.ResourceClaim(placed.Namespace, *name)
		// A named claim is the pod's own by the caller's word; one that is
		// allocated or reserved already is plainly not.
		named := placed.Spec.ResourceClaims[i].ResourceClaimName != nil && stored != nil &&
			stored.Status.Allocation == nil && len(stored.Status.ReservedFor) == 0
		if srcClaim == nil || stored == nil || !ownedBy(stored, placed) && !named {
			return fmt.Errorf("replicate pod %s: claim %s is not its own", podKey(placed), *name)
		}
		alloc, err := moveAllocation(srcClaim.Status.Allocation, srcNode, dstNode, [2]string{placed.Namespace, *name})
		if err != nil {
			return err
		}
		claim := statusCopy(stored)
		claim.Status.Allocation = alloc
		claim.Finalizers = srcClaim.Finalizers
		reserveFor(claim, placed)
		eng.snap.SetResourceClaim(claim)
	}
	return eng.snap.AddPodLike(placed, src.UID)
}

// Replicable reports whether a pod's placement depends only on its own
// node, so that Replicate may copy it: no inter-pod (anti-)affinity or
// topology spreading, no claim shared with other pods (nor, with DRAWorkloadResourceClaims, with its
// PodGroup), no volumes that
// bind cluster-wide. ownNamed says the claims the pod references by name
// (resourceClaimName) are its own, which only the caller, seeing all
// pending pods, can tell; otherwise they may be shared.
func Replicable(pod *v1.Pod, ownNamed bool) bool {
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return false
	}
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return false
	}
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil && !ownNamed {
			return false
		}
	}
	// A claim the pod may share with its PodGroup is allocated once.
	if pod.Spec.SchedulingGroup != nil && len(pod.Spec.ResourceClaims) > 0 && groupClaimsEnabled() {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	return true
}

// moveAllocation rewrites an allocation made on srcNode for dstNode: pools
// are named after their node, and the node selector names the node. A
// share of a device that allows multiple allocations (consumable
// capacity) gets a share ID of its own, derived from the claim (seed, its
// two parts joined by "/") so that plans are repeatable; the allocator
// makes random ones. Only what changes is copied: the rest (device
// configs, tolerations, capacities) is shared with the source, as
// objects in a snapshot are never modified in place.
func moveAllocation(a *resourceapi.AllocationResult, srcNode, dstNode string, seed [2]string) (*resourceapi.AllocationResult, error) {
	if a == nil {
		return nil, fmt.Errorf("replicate: source claim is not allocated")
	}
	out := *a
	out.Devices.Results = slices.Clone(a.Devices.Results)
	for i := range out.Devices.Results {
		r := &out.Devices.Results[i]
		if r.ShareID != nil {
			r.ShareID = ptr.To(types.UID(uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "draxr:%s/%s/%s/%d", dstNode, seed[0], seed[1], i)).String()))
		}
		if r.Pool != srcNode {
			return nil, fmt.Errorf("replicate: device %s/%s/%s is not in the node's own pool", r.Driver, r.Pool, r.Device)
		}
		r.Pool = dstNode
	}
	if sel := a.NodeSelector; sel != nil && selectorNames(sel, srcNode) {
		out.NodeSelector = sel.DeepCopy()
		for t := range out.NodeSelector.NodeSelectorTerms {
			term := &out.NodeSelector.NodeSelectorTerms[t]
			for _, reqs := range [][]v1.NodeSelectorRequirement{term.MatchFields, term.MatchExpressions} {
				for j := range reqs {
					for k, v := range reqs[j].Values {
						if v == srcNode {
							reqs[j].Values[k] = dstNode
						}
					}
				}
			}
		}
	}
	return &out, nil
}

// selectorNames reports whether a node selector names the node.
func selectorNames(sel *v1.NodeSelector, node string) bool {
	for _, term := range sel.NodeSelectorTerms {
		for _, reqs := range [][]v1.NodeSelectorRequirement{term.MatchFields, term.MatchExpressions} {
			for _, r := range reqs {
				if slices.Contains(r.Values, node) {
					return true
				}
			}
		}
	}
	return false
}
