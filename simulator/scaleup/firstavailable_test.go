package scaleup

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// modelGroup is a group whose nodes have n devices of one model.
func modelGroup(model string, n, cpu, maxSize int) *nodegroup.NodeGroup {
	slice := fx.DeviceSlice("x", fx.Driver, n, model)
	return &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: model},
		Spec: nodegroup.Spec{MaxSize: maxSize, Template: *fx.Node("template", int64(cpu), 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{slice.Spec}}}
}

func modelClass(model string) *resourceapi.DeviceClass {
	c := fx.Class(model, fx.Driver, "", fx.Epoch)
	c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].model == %q", fx.Driver, fx.Driver, model)}}}
	return c
}

// Pods that prefer one H100 and fall back to two A100s (firstAvailable):
// the H100 group grows while it can, though the expander (least waste,
// the A100 nodes are smaller) would grow the A100 group; at its max, the
// A100 group takes them.
func TestFirstChoiceAcrossNodeGroups(t *testing.T) {
	for _, tc := range []struct {
		name      string
		h100Max   int
		wantGroup string
	}{
		{"the preferred group can grow", 10, "h100"},
		{"the preferred group is at its max", 0, "a100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetDeviceClass(modelClass("h100"))
			snap.SetDeviceClass(modelClass("a100"))
			tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "train-gpu", Namespace: "default"},
				Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
					Requests: []resourceapi.DeviceRequest{{Name: "gpu", FirstAvailable: []resourceapi.DeviceSubRequest{
						{Name: "h100", DeviceClassName: "h100", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
						{Name: "a100", DeviceClassName: "a100", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
					}}}}}}}
			snap.SetResourceClaimTemplate(tmpl)
			p := newPlanner(t, snap, modelGroup("h100", 2, 64, tc.h100Max), modelGroup("a100", 4, 16, 10))
			var pods []*v1.Pod
			for i := range 4 {
				pods = append(pods, fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("train-%d", i), 1000, nil), "gpu", "train-gpu"))
			}
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != tc.wantGroup || len(plan.NoScaleUp) != 0 {
				t.Fatalf("plan %+v (no scale-up %+v), want %s for all 4 pods", plan.ScaleUps, plan.NoScaleUp, tc.wantGroup)
			}
		})
	}
}
