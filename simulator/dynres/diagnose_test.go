package dynres

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

func TestWhyNot(t *testing.T) {
	slices := []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 40).Spec}
	class := fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch)
	classes := func(name string) *resourceapi.DeviceClass {
		if name == class.Name {
			return class
		}
		return nil
	}
	req := func(name, class string, count int64) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	}
	tests := []struct {
		name string
		reqs []resourceapi.DeviceRequest
		want string
	}{
		{name: "fits", reqs: []resourceapi.DeviceRequest{req("a", "gpu.example.com", 8)}},
		{name: "32-device limit", reqs: []resourceapi.DeviceRequest{req("a", "gpu.example.com", 20), req("b", "gpu.example.com", 13)},
			want: "the claim asks 33 devices; a claim can be allocated at most 32"},
		{name: "missing class", reqs: []resourceapi.DeviceRequest{req("a", "gpu.exmaple.com", 1)},
			want: "request a: DeviceClass gpu.exmaple.com does not exist"},
		{name: "too few", reqs: []resourceapi.DeviceRequest{req("a", "gpu.example.com", 41)},
			want: "request a asks 41 devices of DeviceClass gpu.example.com; a node has 40"},
	}
	m := NewMatcher()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: tc.reqs}}
			got := m.WhyNot(spec, classes, slices)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("WhyNot = %q, want %q", got, tc.want)
			}
		})
	}
}

// A share request no device can give (KEP-5075) is named, field and
// device: above the device's capacity, or above what its request policy
// allows; one within both fits.
func TestWhyNotCapacity(t *testing.T) {
	shared := fx.SharedGPUSlice("x") // 80Gi memory, requests of at least 1Gi
	limited := fx.SharedGPUSlice("y")
	c := limited.Spec.Devices[0].Capacity["memory"]
	c.RequestPolicy.ValidRange.Max = ptr.To(resource.MustParse("40Gi"))
	limited.Spec.Devices[0].Capacity["memory"] = c
	class := fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch)
	classes := func(string) *resourceapi.DeviceClass { return class }
	share := func(memory string) *resourceapi.ResourceClaimSpec {
		return &fx.ShareTemplate("s", class.Name, memory).Spec.Spec
	}
	m := NewMatcher()
	for _, tc := range []struct {
		name   string
		slices []resourceapi.ResourceSliceSpec
		memory string
		want   string
	}{
		{name: "fits", slices: []resourceapi.ResourceSliceSpec{shared.Spec}, memory: "20Gi"},
		{name: "above capacity", slices: []resourceapi.ResourceSliceSpec{shared.Spec}, memory: "100Gi",
			want: "request devices: capacity.requests[memory] 100Gi is more than device gpu.example.com/gpu-0 has (80Gi)"},
		{name: "above the policy", slices: []resourceapi.ResourceSliceSpec{limited.Spec}, memory: "60Gi",
			want: "request devices: capacity.requests[memory] 60Gi is more than device gpu.example.com/gpu-0's request policy allows (40Gi)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.WhyNot(share(tc.memory), classes, tc.slices); got != tc.want {
				t.Errorf("WhyNot = %q, want %q", got, tc.want)
			}
		})
	}
}
