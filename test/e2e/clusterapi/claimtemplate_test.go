package clusterapi

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Scale from zero for pods that ask for a GPU through a ResourceClaim
// template, not an extended resource: 12 pods on 8-GPU machines are
// exactly 2 replicas, and the count holds.
func TestScaleFromZeroClaimTemplate(t *testing.T) {
	const ns, driver, class = "capi-template", "tmpl.example.com", "tmpl-gpu"
	ctx, dyn := begin(t, ns)
	createClass(ctx, t, class, driver, "")
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}}
	if _, err := cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gpuGroup(ctx, t, dyn, capi.MachineDeployment, ns, "gpu", driver, false)
	startAutoscaler(t, ns)

	labels := map[string]string{"app": "train"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](12), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				ResourceClaims:                []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
				Containers: []v1.Container{{Name: "main", Image: "registry.example/train",
					Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}},
			}}},
	}
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(ctx, t, ns, 12)
	replicasStay(ctx, t, dyn, ns, "gpu", 2, "12 pods, 8 GPUs a machine")
}
