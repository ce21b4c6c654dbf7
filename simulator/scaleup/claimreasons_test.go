package scaleup

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// A pod no group can take because of its claim is told which request or
// constraint rules each group out, not only that the allocator "cannot
// allocate all claims".
func TestClaimReasonNamesTheConstraint(t *testing.T) {
	// Eight H100-like GPUs, one per PCIe root, model H100.
	gpus := resourceapi.ResourceSliceSpec{Driver: fx.Driver}
	for i := range 8 {
		gpus.Devices = append(gpus.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"resource.kubernetes.io/pcieRoot": {StringValue: ptr.To(fmt.Sprintf("pci0000:%02x", i))},
			"model":                           {StringValue: ptr.To("H100")},
		}})
	}
	plainGroup := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: nodegroup.Spec{MaxSize: 10,
		Template: *fx.Node("t", 64, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{gpus}}}
	migGroup := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "mig"}, Spec: nodegroup.Spec{MaxSize: 10,
		Template: *fx.Node("t", 64, 256, nil)}}
	for _, s := range fx.NVIDIADynamicMIG("t", 1) {
		s.Spec.NodeName, s.Spec.Pool = nil, resourceapi.ResourcePool{}
		migGroup.Spec.ResourceSlices = append(migGroup.Spec.ResourceSlices, s.Spec)
	}
	bigGroup := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: nodegroup.Spec{MaxSize: 10,
		Template: *fx.Node("t", 64, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 40).Spec}}}
	request := func(name, class string, count int64, selector string) resourceapi.DeviceRequest {
		r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
			AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
		if selector != "" {
			r.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
		}
		return r
	}
	tests := []struct {
		name  string
		group *nodegroup.NodeGroup
		spec  resourceapi.ResourceClaimSpec
		pod   *v1.Pod // instead of a claim
		want  string
	}{
		{name: "matchAttribute", group: plainGroup,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests:    []resourceapi.DeviceRequest{request("gpus", "gpu.example.com", 2, "")},
				Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot"))}}}},
			want: "node group h100: claim gpu: constraints[0] matchAttribute resource.kubernetes.io/pcieRoot: at most 1 of the devices the requests may get share one value"},
		{name: "selector", group: plainGroup,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				request("gpus", "gpu.example.com", 1, `device.attributes["gpu.example.com"].model == "H200"`)}}},
			want: "node group h100: claim gpu: request gpus: no device matches DeviceClass gpu.example.com and the request's selectors"},
		{name: "counter sets", group: migGroup,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				request("gpus", "mig.nvidia.com", 3, `device.attributes["gpu.nvidia.com"].profile in ["3g.40gb", "4g.40gb"]`)}}},
			want: "node group mig: claim gpu: request gpus asks 3 devices of DeviceClass mig.nvidia.com; they share counter sets, which hold at most 2 of them at once (counter copy-engines of gpu-0-counter-set)"},
		// The scheduler names the 32-device limit itself.
		{name: "32-device limit", group: bigGroup,
			spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				request("a", "gpu.example.com", 20, ""), request("b", "gpu.example.com", 13, "")}}},
			want: "request b: adding 13 devices exceeds the claim limit of 32"},
		{name: "32-device limit, extended resource", group: bigGroup, pod: fx.Pod("wide", 100, fx.GPUs(fx.GPUResource, 33)),
			want: "adding 33 devices exceeds the claim limit of 32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			for _, c := range fx.NVIDIAClasses() {
				snap.SetDeviceClass(c)
			}
			pod := tc.pod
			if pod == nil {
				tmpl := fx.ClaimTemplate("asks", "gpu.example.com", 1)
				tmpl.Spec.Spec = tc.spec
				snap.SetResourceClaimTemplate(tmpl)
				pod = fx.WithTemplateClaim(fx.Pod("p", 100, nil), "gpu", "asks")
			}
			p := newPlanner(t, snap, tc.group)
			plan, err := p.Plan([]*v1.Pod{pod})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUps) != 0 || len(plan.NoScaleUp) != 1 {
				t.Fatalf("scale-ups %+v, no scale-up %+v; want the pod left out", plan.ScaleUps, plan.NoScaleUp)
			}
			got := plan.NoScaleUp[0].Reason
			for _, g := range plan.NoScaleUp[0].NodeGroups {
				got += " | " + g.Message
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("reason %q,\nwant it to contain %q", got, tc.want)
			}
		})
	}
}
