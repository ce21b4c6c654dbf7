package capacitybuffer

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Options say which of CA's two parts run.
type Options struct {
	// Controller sets the buffer's replicas, template and readiness
	// (--capacity-buffer-controller-enabled); Injection makes the pods of
	// a ready buffer (--capacity-buffer-pod-injection-enabled).
	Controller, Injection bool
}

// Serve does to b what the buffer controller and CA's injection do, in
// b's status, and returns the pods b stands for (none unless Injection).
// templates finds PodTemplates (nil when absent).
func Serve(b *CapacityBuffer, templates func(ns, name string) *v1.PodTemplate, devices Devices, opts Options, now time.Time) []*v1.Pod {
	var tmpl *v1.PodTemplate
	if opts.Controller {
		tmpl = control(b, templates, devices, now)
	} else if ref := b.Status.PodTemplateRef; ref != nil {
		tmpl = templates(b.Namespace, ref.Name)
	}
	if !opts.Injection {
		return nil
	}
	return inject(b, tmpl, now)
}

// control is the buffer controller's work on b: the pod template and the
// replicas, or why not, in b's status. It returns the template.
func control(b *CapacityBuffer, templates func(ns, name string) *v1.PodTemplate, devices Devices, now time.Time) *v1.PodTemplate {
	notReady := func(err error) *v1.PodTemplate {
		b.Status.PodTemplateRef, b.Status.Replicas, b.Status.PodTemplateGeneration = nil, nil, nil
		setCondition(b, ReadyForProvisioning, metav1.ConditionFalse, ReasonError, "Buffer not ready for provisioning: "+err.Error(), now)
		return nil
	}
	if b.Spec.ScalableRef != nil {
		return notReady(&Error{Buffer: b.Key(), Field: "spec.scalableRef",
			Detail: "draxr does not read workloads' templates yet: name a PodTemplate in spec.podTemplateRef"})
	}
	if b.Spec.PodTemplateRef == nil {
		return notReady(&Error{Buffer: b.Key(), Field: "spec", Detail: "names neither a podTemplateRef nor a scalableRef"})
	}
	tmpl := templates(b.Namespace, b.Spec.PodTemplateRef.Name)
	if tmpl == nil {
		return notReady(&Error{Buffer: b.Key(), Field: "spec.podTemplateRef.name",
			Detail: fmt.Sprintf("PodTemplate %s/%s not found", b.Namespace, b.Spec.PodTemplateRef.Name)})
	}
	pods := Pods(b, &tmpl.Template, 1)
	n, err := Replicas(b, pods[0], nil, devices)
	if err != nil {
		return notReady(err)
	}
	b.Status.PodTemplateRef = &LocalObjectRef{Name: tmpl.Name}
	b.Status.Replicas = ptr.To(n)
	b.Status.PodTemplateGeneration = ptr.To(tmpl.Generation)
	b.Status.ProvisioningStrategy = ptr.To(b.Strategy())
	setCondition(b, ReadyForProvisioning, metav1.ConditionTrue, ReasonAttributesSetSuccessfully, "ready", now)
	return tmpl
}

// inject is CA's injection for b: its pods, and its Provisioning
// condition.
func inject(b *CapacityBuffer, tmpl *v1.PodTemplate, now time.Time) []*v1.Pod {
	ready := meta.IsStatusConditionTrue(b.Status.Conditions, ReadyForProvisioning)
	switch {
	case !ready || b.Status.Replicas == nil:
		setCondition(b, Provisioning, metav1.ConditionFalse, ReasonNotReadyForProvisioning, "CapacityBuffer is not ready for provisioning", now)
		return nil
	case *b.Status.Replicas == 0:
		setCondition(b, Provisioning, metav1.ConditionFalse, ReasonBufferIsEmpty, "CapacityBuffer has zero replicas", now)
		return nil
	case tmpl == nil:
		setCondition(b, Provisioning, metav1.ConditionFalse, ReasonFailedToGetPodTemplate,
			"failed to get pod template with error: "+errors.New("not found").Error(), now)
		return nil
	}
	setCondition(b, Provisioning, metav1.ConditionTrue, ReasonFakePodsInjected, "", now)
	pods := Pods(b, &tmpl.Template, *b.Status.Replicas)
	for _, p := range pods {
		p.CreationTimestamp = metav1.NewTime(now)
	}
	return pods
}

func setCondition(b *CapacityBuffer, t string, s metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(now)})
}
