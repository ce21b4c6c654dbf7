package placement

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// A DeviceTaintRule takes its devices away from claims that do not
// tolerate the taint (extended-resource pods among them) and leaves them
// to a claim that does, as the scheduler's allocator does.
func TestDeviceTaintRuleTolerations(t *testing.T) {
	rule := &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "maintenance"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(fx.Driver)},
			Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Value: "true", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		},
	}
	tolerating := fx.Claim("tolerating", gpuClass, 1)
	tolerating.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{
		Key: "example.com/maintenance", Operator: resourceapi.DeviceTolerationOpEqual, Value: "true", Effect: resourceapi.DeviceTaintEffectNoSchedule,
	}}
	tests := []struct {
		name  string
		pod   func() *v1.Pod
		claim *resourceapi.ResourceClaim
		fits  bool
	}{
		{name: "extended resource: no toleration possible", pod: func() *v1.Pod { return fx.Pod("xr", 100, fx.GPUs(fx.GPUResource, 1)) }},
		{name: "claim without toleration", pod: func() *v1.Pod { return fx.WithClaim(fx.Pod("plain", 100, nil), "gpu", "plain") }, claim: fx.Claim("plain", gpuClass, 1)},
		{name: "claim tolerating the taint", pod: func() *v1.Pod { return fx.WithClaim(fx.Pod("tol", 100, nil), "gpu", "tolerating") }, claim: tolerating, fits: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
			snap.SetDeviceTaintRules([]*resourceapi.DeviceTaintRule{rule})
			if tc.claim != nil {
				snap.SetResourceClaim(tc.claim.DeepCopy())
			}
			addNode(t, snap, "node-0", nil, fx.GPUSlice("node-0", 2))
			h := newEngine(t, snap)
			err := h.CheckPredicates(tc.pod(), "node-0")
			if fits := err == nil; fits != tc.fits {
				t.Errorf("fits = %v (%v), want %v", fits, err, tc.fits)
			}
		})
	}
}
