package placement

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// specialClaimName is the in-memory name the DynamicResources plugin gives
// the extended-resource claim before PreBind creates it in the API server.
const specialClaimName = "<extended-resources>"

// commit writes what PreBind and binding would: every claim allocated in
// Reserve gets its allocation; every claim of the pod is reserved for it;
// the extended-resource claim is persisted as a pod-owned claim and the pod
// status records its request mappings; the pod is bound to the node.
func (eng *Engine) commit(pod *v1.Pod, nodeName string) (*v1.Pod, error) {
	// A shallow copy is enough: only top-level fields change, and pods are
	// never modified in place once handed to the placement engine.
	copied := *pod
	placed := &copied
	placed.Spec.NodeName = nodeName
	placed.Status.ExtendedResourceClaimStatus = nil

	pending := eng.snap.PendingAllocations()
	for _, allocated := range pending {
		if allocated.Name != specialClaimName {
			continue
		}
		claim := eng.extendedResourceClaim(placed, allocated)
		mappings, err := requestMappings(placed, claim)
		if err != nil {
			return nil, err
		}
		placed.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
			ResourceClaimName: claim.Name,
			RequestMappings:   mappings,
		}
		eng.snap.SetResourceClaim(claim)
	}

	for i := range placed.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(placed, &placed.Spec.ResourceClaims[i])
		if err != nil {
			return nil, fmt.Errorf("pod %s: spec.resourceClaims[%d]: %w", podKey(placed), i, err)
		}
		if name == nil {
			continue // the template produced no claim; nothing to reserve
		}
		stored := eng.snap.ResourceClaim(placed.Namespace, *name)
		if stored == nil {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s/%s not found", podKey(placed), placed.Namespace, *name)
		}
		claim := statusCopy(stored)
		if allocated, ok := pending[stored.UID]; ok {
			claim.Status.Allocation = allocated.Status.Allocation
			claim.Finalizers = allocated.Finalizers
		}
		eng.reserve(claim, placed, &placed.Spec.ResourceClaims[i])
		eng.snap.SetResourceClaim(claim)
	}
	add := eng.snap.AddPod
	if eng.like != "" {
		add = func(pod *v1.Pod) error { return eng.snap.AddPodLike(pod, eng.like) }
	}
	if err := add(placed); err != nil {
		return nil, err
	}
	return placed, nil
}

// reserve reserves the claim as the scheduler's PreBind does: for the
// pod's PodGroup when the claim is the group's (DRAWorkloadResourceClaims),
// else for the pod.
func (eng *Engine) reserve(claim *resourceapi.ResourceClaim, pod *v1.Pod, pc *v1.PodResourceClaim) {
	if group := eng.groupOf(pod); group != nil && boundToGroup(pod, group, pc) {
		if !resourceclaim.IsReservedForPod(pod, claim, true) {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
				APIGroup: schedulingapi.GroupName, Resource: "podgroups", Name: group.Name, UID: group.UID,
			})
		}
		return
	}
	reserveFor(claim, pod)
}

func reserveFor(claim *resourceapi.ResourceClaim, pod *v1.Pod) {
	if resourceclaim.IsReservedForPod(pod, claim, false) {
		return
	}
	claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
		Resource: "pods", Name: pod.Name, UID: pod.UID,
	})
}

// extendedResourceClaim turns the plugin's in-memory claim into the object
// the scheduler creates: the scheduler's generateName prefix with a suffix
// derived from the pod UID, owned by the pod, allocated and reserved for
// it. The plugin hands over a copy in Reserve and keeps no reference to
// it, so it is finished in place.
func (eng *Engine) extendedResourceClaim(pod *v1.Pod, allocated *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	claim := allocated
	claim.Name = eng.freeClaimName(pod, pod.Name+"-extended-resources-", string(pod.UID))
	claim.GenerateName = ""
	claim.UID = types.UID("draxr-xr-" + string(pod.UID))
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	}
	claim.Status.ReservedFor = nil
	reserveFor(claim, pod)
	return claim
}

// freeClaimName is generatedName(prefix, seed) unless a claim of another
// pod already has that name (long pod names are truncated, and the suffix
// is a hash): then it draws again, as generateName never hands out a taken
// name. Without this the new claim would replace the other pod's claim and
// free its devices.
func (eng *Engine) freeClaimName(pod *v1.Pod, prefix, seed string) string {
	return eng.freeClaimNameOf(pod.Namespace, pod.UID, prefix, seed)
}

// freeClaimNameOf is freeClaimName for a claim owned by the object with
// UID owner in namespace.
func (eng *Engine) freeClaimNameOf(namespace string, owner types.UID, prefix, seed string) string {
	name := generatedName(prefix, seed)
	for i := 1; ; i++ {
		if c := eng.snap.ResourceClaim(namespace, name); c == nil || controlledBy(c, owner) {
			return name
		}
		name = generatedName(prefix, seed+"#"+strconv.Itoa(i))
	}
}

// generatedName mimics generateName (prefix truncated so the result is at
// most 63 characters) with a stable 5-character suffix.
func generatedName(prefix, seed string) string {
	const maxLen, suffixLen = 63, 5
	if len(prefix) > maxLen-suffixLen {
		prefix = prefix[:maxLen-suffixLen]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(seed))
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	sum := h.Sum32()
	suffix := make([]byte, suffixLen)
	for i := range suffix {
		suffix[i] = alphabet[sum%uint32(len(alphabet))]
		sum /= uint32(len(alphabet))
	}
	return prefix + string(suffix)
}
