package capacitybuffer

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// devicesOf: example.com/gpu and its implicit name are DRA-backed (class
// gpu.example.com); the pod takes its GPUs by name or by claim template.
func devicesOf(templates ...*resourceapi.ResourceClaimTemplate) Devices {
	return func(pod *v1.Pod, name v1.ResourceName) (int64, bool, error) {
		if name != fx.GPUResource && name != "deviceclass.resource.kubernetes.io/gpu.example.com" {
			return 0, false, nil
		}
		n, err := ClaimDevices(pod, "gpu.example.com", func(ns, name string) *resourceapi.ResourceClaimTemplate {
			for _, t := range templates {
				if t.Name == name {
					return t
				}
			}
			return nil
		})
		for _, c := range pod.Spec.Containers {
			if q, ok := c.Resources.Requests[fx.GPUResource]; ok {
				n += q.Value()
			}
		}
		return n, true, err
	}
}

func buffer(mut func(*Spec)) *CapacityBuffer {
	b := &CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "ml", UID: "b-uid"}}
	mut(&b.Spec)
	return b
}

func TestReplicas(t *testing.T) {
	onePerPod := fx.Pod("p", 500, fx.GPUs(fx.GPUResource, 1))
	twoByClaim := fx.WithTemplateClaim(fx.Pod("p", 500, nil), "gpu", "two-gpus")
	two := fx.ClaimTemplate("two-gpus", "gpu.example.com", 2)
	all := fx.ClaimTemplate("all-gpus", "gpu.example.com", 1)
	all.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	allByClaim := fx.WithTemplateClaim(fx.Pod("p", 500, nil), "gpu", "all-gpus")
	gpus := func(n string) v1.ResourceList { return v1.ResourceList{fx.GPUResource: resource.MustParse(n)} }
	for _, tc := range []struct {
		name     string
		spec     func(*Spec)
		pod      *v1.Pod
		scalable *int32
		want     int32
		wantErr  string
	}{
		{"replicas", func(s *Spec) { s.Replicas = ptr.To[int32](5) }, onePerPod, nil, 5, ""},
		{"CA's rule: 16 GPUs of one-GPU pods", func(s *Spec) { s.Limits = gpus("16") }, onePerPod, nil, 16, ""},
		{"replicas capped by limits", func(s *Spec) { s.Replicas = ptr.To[int32](20); s.Limits = gpus("16") }, onePerPod, nil, 16, ""},
		{"devices through claims (CA: limits name nothing the pod requests)", func(s *Spec) { s.Limits = gpus("16") }, twoByClaim, nil, 8, ""},
		{"the class's implicit name", func(s *Spec) {
			s.Limits = v1.ResourceList{"deviceclass.resource.kubernetes.io/gpu.example.com": resource.MustParse("16")}
		}, onePerPod, nil, 16, ""},
		{"cpu limit as CA", func(s *Spec) { s.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")} }, onePerPod, nil, 4, ""},
		{"percentage of the scalable object, rounded up", func(s *Spec) {
			s.ScalableRef = &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "serve"}
			s.Percentage = ptr.To[int32](10)
		}, onePerPod, ptr.To[int32](25), 3, ""},
		{"percentage without scalableRef", func(s *Spec) { s.Percentage = ptr.To[int32](10) }, onePerPod, nil, 0,
			"CapacityBuffer ml/warm: spec.percentage: is a share of spec.scalableRef's replicas"},
		{"limits in the wrong unit", func(s *Spec) { s.Limits = gpus("500m") }, onePerPod, nil, 0,
			"CapacityBuffer ml/warm: spec.limits[example.com/gpu]: 500m is not a whole number of devices"},
		{"a claim of all devices has no count", func(s *Spec) { s.Limits = gpus("16") }, allByClaim, nil, 0,
			"asks for all devices of class gpu.example.com"},
		{"limits naming nothing the pod asks", func(s *Spec) { s.Limits = v1.ResourceList{"example.com/fpga": resource.MustParse("4")} },
			onePerPod, nil, 0, "spec.limits: names no resource the buffer's pod asks for"},
		{"nothing to count", func(*Spec) {}, onePerPod, nil, 0, "spec: replicas, percentage and limits are not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replicas(buffer(tc.spec), tc.pod, tc.scalable, devicesOf(two, all))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("replicas %d (%v), want %d", got, err, tc.want)
			}
		})
	}
}

func TestPods(t *testing.T) {
	b := buffer(func(s *Spec) { s.Replicas = ptr.To[int32](2) })
	tmpl := &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "serve"}}, Spec: fx.Pod("p", 500, fx.GPUs(fx.GPUResource, 1)).Spec}
	pods := Pods(b, tmpl, 2)
	if len(pods) != 2 || pods[0].Name != "capacity-buffer-warm-1" || pods[1].UID != "b-uid-2" || !IsBufferPod(pods[0]) || BufferOf(pods[1]) != "warm" ||
		pods[0].Annotations[safeToEvict] != "true" || pods[0].Labels["app"] != "serve" || pods[0].Spec.SchedulerName != v1.DefaultSchedulerName {
		t.Fatalf("pods %+v", pods)
	}
}
