package dynres

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

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
