package capacitybuffer

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// A scalableRef buffer takes its pods from the workload's template and a
// percentage of its replicas; a podTemplateRef one from the PodTemplate;
// what is missing or not a workload says which field.
func TestServe(t *testing.T) {
	serve := &v1.PodTemplateSpec{Spec: fx.Pod("p", 500, fx.GPUs(fx.GPUResource, 1)).Spec}
	src := Sources{
		Templates: func(ns, name string) *v1.PodTemplate {
			if name == "serve" {
				return &v1.PodTemplate{Template: *serve}
			}
			return nil
		},
		Workloads: func(ns string, ref ScalableRef) (*v1.PodTemplateSpec, int32, bool) {
			if ref.Kind == "Deployment" && ref.Name == "serve" {
				return serve, 25, true
			}
			return nil, 0, false
		},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		spec     func(*Spec)
		wantPods int
		wantErr  string
	}{
		{"10% of a Deployment's 25", func(s *Spec) {
			s.ScalableRef = &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "serve"}
			s.Percentage = ptr.To[int32](10)
		}, 3, ""},
		{"a PodTemplate", func(s *Spec) { s.PodTemplateRef = &LocalObjectRef{Name: "serve"}; s.Replicas = ptr.To[int32](2) }, 2, ""},
		{"a missing Deployment", func(s *Spec) {
			s.ScalableRef = &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "gone"}
			s.Replicas = ptr.To[int32](1)
		}, 0, "spec.scalableRef.name: Deployment ml/gone not found"},
		{"not a workload", func(s *Spec) {
			s.ScalableRef = &ScalableRef{APIGroup: "", Kind: "Service", Name: "serve"}
			s.Replicas = ptr.To[int32](1)
		}, 0, "spec.scalableRef: /Service is not a workload draxr reads"},
		{"both refs", func(s *Spec) {
			s.ScalableRef = &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "serve"}
			s.PodTemplateRef = &LocalObjectRef{Name: "serve"}
			s.Replicas = ptr.To[int32](1)
		}, 0, "spec: names both a podTemplateRef and a scalableRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := buffer(tc.spec)
			pods := ServeAll([]*CapacityBuffer{b}, src, devicesOf(), nil, Options{Controller: true, Injection: true}, now)
			if len(pods) != tc.wantPods {
				t.Fatalf("%d pods, want %d; status %+v", len(pods), tc.wantPods, b.Status)
			}
			ready := meta.FindStatusCondition(b.Status.Conditions, ReadyForProvisioning)
			if tc.wantErr == "" {
				if ready == nil || ready.Status != "True" || !meta.IsStatusConditionTrue(b.Status.Conditions, Provisioning) {
					t.Errorf("conditions %+v", b.Status.Conditions)
				}
				return
			}
			if ready == nil || ready.Reason != ReasonError || !strings.Contains(ready.Message, tc.wantErr) {
				t.Errorf("ReadyForProvisioning %+v, want %q", ready, tc.wantErr)
			}
			if p := meta.FindStatusCondition(b.Status.Conditions, Provisioning); p == nil || p.Reason != ReasonNotReadyForProvisioning {
				t.Errorf("Provisioning %+v", p)
			}
		})
	}
}

// Injection alone (another controller fills the status) of a buffer whose
// resolved PodTemplate is gone: no pods, and CA's FailedToGetPodTemplate
// naming the template.
func TestInjectWithoutItsTemplate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := buffer(func(s *Spec) { s.PodTemplateRef = &LocalObjectRef{Name: "gone"} })
	b.Status.PodTemplateRef = &LocalObjectRef{Name: "gone"}
	b.Status.Replicas = ptr.To[int32](2)
	setCondition(b, ReadyForProvisioning, "True", ReasonAttributesSetSuccessfully, "ready", now)
	src := Sources{Templates: func(string, string) *v1.PodTemplate { return nil }}
	if pods := ServeAll([]*CapacityBuffer{b}, src, devicesOf(), nil, Options{Injection: true}, now); len(pods) != 0 {
		t.Fatalf("%d pods from a buffer without its template", len(pods))
	}
	p := meta.FindStatusCondition(b.Status.Conditions, Provisioning)
	if p == nil || p.Reason != ReasonFailedToGetPodTemplate || !strings.Contains(p.Message, "PodTemplate ml/gone not found") {
		t.Errorf("Provisioning %+v, want %s naming PodTemplate ml/gone", p, ReasonFailedToGetPodTemplate)
	}
}

// With a template writer, a scalableRef buffer's pods come from the
// managed PodTemplate as stored, its status names it; a template that
// cannot be written leaves the buffer not ready, saying which.
func TestServeManagedTemplate(t *testing.T) {
	serve := &v1.PodTemplateSpec{Spec: fx.Pod("p", 500, fx.GPUs(fx.GPUResource, 1)).Spec}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var written []*v1.PodTemplate
	src := Sources{
		Workloads: func(string, ScalableRef) (*v1.PodTemplateSpec, int32, bool) { return serve, 4, true },
		Manage: func(t *v1.PodTemplate) (*v1.PodTemplate, error) {
			written = append(written, t)
			stored := t.DeepCopy()
			stored.Generation = 3
			stored.Template.Spec.SchedulerName = "default-scheduler" // the API server's default
			return stored, nil
		},
	}
	b := buffer(func(s *Spec) {
		s.ScalableRef = &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "serve"}
		s.Replicas = ptr.To[int32](2)
	})
	b.UID = "uid-1"
	pods := ServeAll([]*CapacityBuffer{b}, src, devicesOf(), nil, Options{Controller: true, Injection: true}, now)
	if len(written) != 1 || written[0].Name != "capacitybuffer-"+b.Name+"-pod-template" || written[0].Namespace != b.Namespace ||
		len(written[0].OwnerReferences) != 1 || written[0].OwnerReferences[0].UID != "uid-1" || !ptr.Deref(written[0].OwnerReferences[0].Controller, false) {
		t.Fatalf("written %+v, want one template owned by the buffer", written)
	}
	if r := b.Status.PodTemplateRef; r == nil || r.Name != written[0].Name || ptr.Deref(b.Status.PodTemplateGeneration, 0) != 3 {
		t.Errorf("status podTemplateRef %+v generation %v, want the managed template at generation 3", r, b.Status.PodTemplateGeneration)
	}
	if len(pods) != 2 || pods[0].Spec.SchedulerName != "default-scheduler" {
		t.Errorf("%d pods, want 2 from the template as stored", len(pods))
	}

	src.Manage = func(*v1.PodTemplate) (*v1.PodTemplate, error) { return nil, errors.New("forbidden") }
	b = buffer(func(s *Spec) { s.ScalableRef = &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "serve"} })
	if pods := ServeAll([]*CapacityBuffer{b}, src, devicesOf(), nil, Options{Controller: true, Injection: true}, now); len(pods) != 0 {
		t.Errorf("%d pods from a buffer whose template was not written", len(pods))
	}
	c := meta.FindStatusCondition(b.Status.Conditions, ReadyForProvisioning)
	if c == nil || c.Status != "False" || !strings.Contains(c.Message, "status.podTemplateRef") || !strings.Contains(c.Message, "forbidden") {
		t.Errorf("ReadyForProvisioning %+v, want False naming status.podTemplateRef and the error", c)
	}
}
