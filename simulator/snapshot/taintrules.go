package snapshot

import (
	resourceapi "k8s.io/api/resource/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
)

// SetDeviceTaintRules sets the cluster's DeviceTaintRules (GA and on in
// Kubernetes 1.37). Every slice added afterwards, live or a new node's
// template, carries the taints the rules put on its devices, as the
// scheduler's ResourceSlice tracker patches the slices its
// DynamicResources plugin sees; the allocator then leaves tainted devices
// to pods that tolerate them. Set the rules before adding slices.
func (s *Snapshot) SetDeviceTaintRules(rules []*resourceapi.DeviceTaintRule) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules) {
		rules = nil // as the tracker, which then ignores them
	}
	s.taintRules = rules
}

func (s *Snapshot) withTaintRules(slice *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	return WithTaintRules(slice, s.taintRules)
}

// WithTaintRules returns slice with the rules' taints added to the
// devices they select, a copy when any applies. The selection is the
// tracker's (k8s.io/dynamic-resource-allocation/resourceslice/tracker,
// applyPatches, not exported): a rule without a selector selects nothing;
// driver, pool and device, when set, must equal the slice's.
func WithTaintRules(slice *resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) *resourceapi.ResourceSlice {
	patched := slice
	for _, rule := range rules {
		sel := rule.Spec.DeviceSelector
		if sel == nil ||
			(sel.Driver != nil && *sel.Driver != slice.Spec.Driver) ||
			(sel.Pool != nil && *sel.Pool != slice.Spec.Pool.Name) {
			continue
		}
		for i := range slice.Spec.Devices {
			if sel.Device != nil && *sel.Device != slice.Spec.Devices[i].Name {
				continue
			}
			if patched == slice {
				patched = slice.DeepCopy()
			}
			patched.Spec.Devices[i].Taints = append(patched.Spec.Devices[i].Taints, rule.Spec.Taint)
		}
	}
	return patched
}
