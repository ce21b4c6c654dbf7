package capacitybuffer

import (
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

// Sources find what buffers name: PodTemplates, and the workloads a
// scalableRef names (nil when absent).
type Sources struct {
	Templates func(ns, name string) *v1.PodTemplate
	// Workloads finds a Deployment's, ReplicaSet's, StatefulSet's or
	// Job's pod template and its replicas (a Job's parallelism).
	Workloads func(ns string, ref ScalableRef) (*v1.PodTemplateSpec, int32, bool)
	// Manage, when set, writes the PodTemplate CA's controller keeps for
	// a scalableRef buffer (ManagedTemplate) and returns it as stored;
	// the buffer's status names it. Unset (a plan from files), the
	// buffer's pods come from the workload's template and its status
	// names none.
	Manage func(*v1.PodTemplate) (*v1.PodTemplate, error)
}

// ServeAll does to the buffers what the buffer controller and CA's
// injection do: each one's status (replicas, template, readiness,
// quotas, provisioning) and the pods the ready ones stand for (none
// unless Injection). quotas are the cluster's ResourceQuotas.
func ServeAll(buffers []*CapacityBuffer, src Sources, devices Devices, quotas []*v1.ResourceQuota, opts Options, now time.Time) []*v1.Pod {
	templates := make(map[*CapacityBuffer]*v1.PodTemplateSpec, len(buffers))
	for _, b := range buffers {
		switch {
		case opts.Controller:
			templates[b] = control(b, src, devices, now)
		case b.Status.PodTemplateRef != nil:
			if t := src.Templates(b.Namespace, b.Status.PodTemplateRef.Name); t != nil {
				templates[b] = &t.Template
			}
		}
	}
	if opts.Controller {
		ApplyQuotas(buffers, func(b *CapacityBuffer) *v1.Pod {
			if t := templates[b]; t != nil && meta.IsStatusConditionTrue(b.Status.Conditions, ReadyForProvisioning) {
				return Pods(b, t, 1)[0]
			}
			return nil
		}, quotas, now)
	}
	if !opts.Injection {
		return nil
	}
	var pods []*v1.Pod
	for _, b := range buffers {
		pods = append(pods, inject(b, templates[b], now)...)
	}
	return pods
}

// scalableGroup is the API group of a workload kind a scalableRef may
// name (CA's), "" for others.
func scalableGroup(kind string) (string, bool) {
	switch kind {
	case "Deployment", "ReplicaSet", "StatefulSet":
		return "apps", true
	case "Job":
		return "batch", true
	}
	return "", false
}

// control is the buffer controller's work on b: the pod template and the
// replicas, or why not, in b's status. It returns the template.
func control(b *CapacityBuffer, src Sources, devices Devices, now time.Time) *v1.PodTemplateSpec {
	notReady := func(err error) *v1.PodTemplateSpec {
		b.Status.PodTemplateRef, b.Status.Replicas, b.Status.PodTemplateGeneration = nil, nil, nil
		setCondition(b, ReadyForProvisioning, metav1.ConditionFalse, ReasonError, "Buffer not ready for provisioning: "+err.Error(), now)
		return nil
	}
	var tmpl *v1.PodTemplateSpec
	var scalable *int32
	switch ref := b.Spec.ScalableRef; {
	case ref != nil && b.Spec.PodTemplateRef != nil:
		return notReady(&Error{Buffer: b.Key(), Field: "spec", Detail: "names both a podTemplateRef and a scalableRef; name one"})
	case ref != nil:
		if group, ok := scalableGroup(ref.Kind); !ok || group != ref.APIGroup {
			return notReady(&Error{Buffer: b.Key(), Field: "spec.scalableRef",
				Detail: fmt.Sprintf("%s/%s is not a workload draxr reads (apps Deployment, ReplicaSet, StatefulSet; batch Job)", ref.APIGroup, ref.Kind)})
		}
		t, n, ok := src.Workloads(b.Namespace, *ref)
		if !ok {
			return notReady(&Error{Buffer: b.Key(), Field: "spec.scalableRef.name",
				Detail: fmt.Sprintf("%s %s/%s not found", ref.Kind, b.Namespace, ref.Name)})
		}
		tmpl, scalable = t, &n
		if src.Manage != nil {
			stored, err := src.Manage(ManagedTemplate(b, t))
			if err != nil {
				return notReady(&Error{Buffer: b.Key(), Field: "status.podTemplateRef",
					Detail: fmt.Sprintf("PodTemplate %s/%s: %v", b.Namespace, ManagedTemplateName(b), err)})
			}
			tmpl = &stored.Template
			b.Status.PodTemplateRef = &LocalObjectRef{Name: stored.Name}
			b.Status.PodTemplateGeneration = ptr.To(stored.Generation)
		}
	case b.Spec.PodTemplateRef != nil:
		t := src.Templates(b.Namespace, b.Spec.PodTemplateRef.Name)
		if t == nil {
			return notReady(&Error{Buffer: b.Key(), Field: "spec.podTemplateRef.name",
				Detail: fmt.Sprintf("PodTemplate %s/%s not found", b.Namespace, b.Spec.PodTemplateRef.Name)})
		}
		tmpl = &t.Template
		b.Status.PodTemplateRef = &LocalObjectRef{Name: t.Name}
		b.Status.PodTemplateGeneration = ptr.To(t.Generation)
	default:
		return notReady(&Error{Buffer: b.Key(), Field: "spec", Detail: "names neither a podTemplateRef nor a scalableRef"})
	}
	pods := Pods(b, tmpl, 1)
	n, err := Replicas(b, pods[0], scalable, devices)
	if err != nil {
		return notReady(err)
	}
	b.Status.Replicas = ptr.To(n)
	b.Status.ProvisioningStrategy = ptr.To(b.Strategy())
	setCondition(b, ReadyForProvisioning, metav1.ConditionTrue, ReasonAttributesSetSuccessfully, "ready", now)
	return tmpl
}

// inject is CA's injection for b: its pods, and its Provisioning
// condition.
func inject(b *CapacityBuffer, tmpl *v1.PodTemplateSpec, now time.Time) []*v1.Pod {
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
			fmt.Sprintf("failed to get pod template with error: PodTemplate %s/%s not found", b.Namespace, templateName(b)), now)
		return nil
	}
	setCondition(b, Provisioning, metav1.ConditionTrue, ReasonFakePodsInjected, "", now)
	pods := Pods(b, tmpl, *b.Status.Replicas)
	for _, p := range pods {
		p.CreationTimestamp = metav1.NewTime(now)
	}
	return pods
}

func setCondition(b *CapacityBuffer, t string, s metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(now)})
}

// templateName names the PodTemplate b's pods come from: the one its
// status resolved, else the one its spec names.
func templateName(b *CapacityBuffer) string {
	switch {
	case b.Status.PodTemplateRef != nil:
		return b.Status.PodTemplateRef.Name
	case b.Spec.PodTemplateRef != nil:
		return b.Spec.PodTemplateRef.Name
	}
	return ""
}

// ManagedTemplateName is the PodTemplate CA's controller keeps for a
// scalableRef buffer: capacitybuffer-<name>-pod-template, the name cut so
// that the whole fits an object name (253 characters).
func ManagedTemplateName(b *CapacityBuffer) string {
	const prefix, suffix, maxLen = "capacitybuffer-", "-pod-template", 253
	name := b.Name
	if room := maxLen - len(prefix) - len(suffix); len(name) > room {
		name = name[:room]
	}
	return prefix + name + suffix
}

// ManagedTemplate is that PodTemplate for a buffer whose pods are spec's:
// controlled by the buffer (deleted with it), with spec's labels,
// annotations and pod spec.
func ManagedTemplate(b *CapacityBuffer, spec *v1.PodTemplateSpec) *v1.PodTemplate {
	return &v1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: ManagedTemplateName(b), Namespace: b.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: Group + "/" + Version, Kind: Kind,
				Name: b.Name, UID: b.UID, Controller: ptr.To(true)}}},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: spec.Labels, Annotations: spec.Annotations}, Spec: spec.Spec},
	}
}
