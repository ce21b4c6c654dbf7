package placement

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"draxr.dev/draxr/scheduler/devicefull"
)

// noFreeDevice returns a test, true only for nodes that have no device
// left for a pod that needs at least one new device: the DynamicResources
// Filter rejects the pod there. A full GPU node costs the allocator a few
// milliseconds to reject a GPU pod; a pending kind of pod that fits no
// existing node would pay that on every node of the fleet every loop. It
// returns nil when the test would not be exact: the profile does not
// filter with DynamicResources, some slices are not local to one node
// (their devices reach nodes the test does not look at), or the pod's
// claims are allocated already or may be satisfied without a free device
// (admin access, allocation mode All).
// A node has a device left as Snapshot.HasFreeDevice says: only plainly
// full nodes are left out.
func (eng *Engine) noFreeDevice(pod *v1.Pod, extended []v1.ResourceName) func(nodeName string) bool {
	if !eng.filtersOnDevices() || len(eng.snap.SlicesForNode("")) > 0 {
		return nil
	}
	claimsNeed, ok := eng.claimsNeedADevice(pod)
	if !ok || !claimsNeed && len(extended) == 0 {
		return nil
	}
	return func(nodeName string) bool {
		ni := eng.snap.NodeInfo(nodeName)
		if ni == nil {
			return false
		}
		if !claimsNeed && !lacksAny(ni.Allocatable.ScalarResources, extended) {
			// Every extended resource is the node's own (a device
			// plugin's): NodeResourcesFit judges them.
			return false
		}
		return !eng.snap.HasFreeDevice(nodeName)
	}
}

// lacksAny reports whether the node's allocatable has none of some
// requested extended resource: NodeResourcesFit then either rejects the
// pod or leaves the resource to DRA, which needs a device for it.
func lacksAny(allocatable map[v1.ResourceName]int64, extended []v1.ResourceName) bool {
	for _, r := range extended {
		if allocatable[r] <= 0 {
			return true
		}
	}
	return false
}

// extendedRequests lists the pod's extended resource requests above zero,
// implicit DeviceClass names (deviceclass.resource.kubernetes.io/<class>)
// included.
func extendedRequests(requests v1.ResourceList) []v1.ResourceName {
	var out []v1.ResourceName
	for name, q := range requests {
		if (v1helper.IsExtendedResourceName(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)) && !q.IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// claimsNeedADevice reports whether some claim of the pod must be given
// at least one device it does not have; ok is false when the pod's claims
// cannot be judged so (one is allocated or reserved already, missing, or
// asks with admin access or allocation mode All).
func (eng *Engine) claimsNeedADevice(pod *v1.Pod) (need, ok bool) {
	for i := range pod.Spec.ResourceClaims {
		rc := &pod.Spec.ResourceClaims[i]
		var spec *resourceapi.ResourceClaimSpec
		name, _, err := resourceclaim.Name(pod, rc)
		switch {
		case err == nil && name != nil:
			claim := eng.snap.ResourceClaim(pod.Namespace, *name)
			if claim == nil || claim.Status.Allocation != nil || len(claim.Status.ReservedFor) > 0 {
				return false, false
			}
			spec = &claim.Spec
		case err == nil:
			continue // no claim for this entry: the pod does without it
		case rc.ResourceClaimTemplateName != nil:
			t := eng.snap.ResourceClaimTemplate(pod.Namespace, *rc.ResourceClaimTemplateName)
			if t == nil {
				return false, false
			}
			spec = &t.Spec.Spec
		default:
			return false, false
		}
		for _, r := range spec.Devices.Requests {
			if !devicefull.RequestNeedsADevice(&r) {
				return false, false
			}
			need = true
		}
	}
	return need, true
}

// filtersOnDevices reports whether DynamicResources (under its upstream
// or draxr name) is one of the profile's Filter plugins.
func (eng *Engine) filtersOnDevices() bool {
	return eng.filtersWith(names.DynamicResources, &eng.deviceFilter)
}
