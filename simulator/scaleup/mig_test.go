package scaleup

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// migGroup is a group of H100 nodes as NVIDIA's driver publishes them in
// DynamicMIG mode: with 8 GPUs 9 slices, 8 counter sets, 208 devices.
func migGroup(gpus, maxSize int) *nodegroup.NodeGroup {
	slices := fx.NVIDIADynamicMIG("template", gpus)
	specs := make([]resourceapi.ResourceSliceSpec, len(slices))
	for i, s := range slices {
		specs[i] = s.Spec
	}
	return &nodegroup.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec:       nodegroup.Spec{MaxSize: maxSize, Template: *fx.H100Node("template"), ResourceSlices: specs},
	}
}

// migProfiles are the H100 80GB MIG profiles NVIDIA's driver offers.
func migProfiles() []string {
	return []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
}

// migTemplates are the claim templates MIG pods use: a whole GPU, and one
// MIG device of a profile, selected by the driver's "profile" attribute.
func migTemplates() []*resourceapi.ResourceClaimTemplate {
	whole := fx.ClaimTemplate("whole-gpu", "gpu.nvidia.com", 1)
	out := []*resourceapi.ResourceClaimTemplate{whole}
	for _, profile := range migProfiles() {
		t := fx.ClaimTemplate("mig-"+profile, "mig.nvidia.com", 1)
		t.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes[%q].profile == %q`, fx.NVIDIADriver, profile)}}}
		out = append(out, t)
	}
	return out
}

// migSetup adds NVIDIA's classes and the MIG claim templates.
func migSetup(snap *snapshot.Snapshot) {
	for _, c := range fx.NVIDIAClasses() {
		snap.SetDeviceClass(c)
	}
	for _, t := range migTemplates() {
		snap.SetResourceClaimTemplate(t)
	}
}

// migPods makes pods asking, by the pattern repeated, a whole GPU ("gpu")
// or a MIG device of a profile ("1g" for 1g.10gb, "3g" for 3g.40gb, or
// the profile's name), each with 2 CPUs; names sort in creation order, so
// the pattern is also the scheduler's queue order.
func migPods(n int, pattern ...string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		k := pattern[i%len(pattern)]
		pods[i] = migPod(fmt.Sprintf("mig-%05d-%s", i, k), k, 2000)
	}
	return pods
}

// migPod is a pod asking a whole GPU or a MIG device (see migPods).
func migPod(name, kind string, milliCPU int64) *v1.Pod {
	template := map[string]string{"gpu": "whole-gpu", "1g": "mig-1g.10gb", "3g": "mig-3g.40gb"}[kind]
	if template == "" {
		template = "mig-" + kind
	}
	return fx.WithTemplateClaim(fx.Pod(name, milliCPU, nil), "gpu", template)
}

func migGroups() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{migGroup(8, 100000)} }
