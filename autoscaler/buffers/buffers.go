// Package buffers is draxr-autoscaler's CapacityBuffer step
// (--capacity-buffer-controller-enabled,
// --capacity-buffer-pod-injection-enabled): each loop the controller part
// sets each buffer's replicas and readiness in its status, and the
// injection part turns ready buffers into in-memory pods for the loop to
// keep room for (scale-down) or to scale up for (scale-up). The replica
// rule and the pods are simulator/capacitybuffer's.
package buffers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
)

// Config is what the step reads and writes through, and CA's flags.
type Config struct {
	// Buffers is the CapacityBuffer informer's lister (unstructured).
	Buffers   cache.GenericLister
	Templates corelisters.PodTemplateLister
	Client    StatusWriter
	// Controller sets the buffers' status; Injection makes their pods.
	Controller, Injection bool
}

// StatusWriter writes a buffer's status.
type StatusWriter interface {
	UpdateStatus(ctx context.Context, b *cb.CapacityBuffer) error
}

// NewStatusWriter writes through the dynamic client.
func NewStatusWriter(c dynamic.Interface) StatusWriter { return dynamicWriter{c} }

type dynamicWriter struct{ c dynamic.Interface }

func (w dynamicWriter) UpdateStatus(ctx context.Context, b *cb.CapacityBuffer) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(cb.Group + "/" + cb.Version)
	u.SetKind(cb.Kind)
	_, err = w.c.Resource(cb.GroupVersionResource()).Namespace(b.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "draxr-autoscaler"})
	return err
}

// Loop is one loop's buffers.
type Loop struct {
	// Pods are the ready buffers' in-memory pods, created now (after every
	// real pod: real pods take free room first).
	Pods []*v1.Pod
	// Buffers are the buffers served, by namespace/name.
	Buffers map[string]*cb.CapacityBuffer
	Errors  []error
}

// Run reads the buffers, sets their status (controller) and makes the
// pods of those ready (injection). objs are the loop's cluster objects
// (DeviceClasses and claim templates count devices). One bad buffer gets
// its condition; the others go on.
func Run(ctx context.Context, cfg Config, objs *input.Objects, now time.Time) (*Loop, error) {
	list, err := cfg.Buffers.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list CapacityBuffers: %w", err)
	}
	l := &Loop{Buffers: map[string]*cb.CapacityBuffer{}}
	var all []*cb.CapacityBuffer
	for _, o := range list {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		b := &cb.CapacityBuffer{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
			l.Errors = append(l.Errors, fmt.Errorf("CapacityBuffer %s/%s: %w", u.GetNamespace(), u.GetName(), err))
			continue
		}
		if b.Strategy() == cb.ActiveCapacity {
			all = append(all, b)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Key() < all[j].Key() })
	devices := cb.NewDevices(objs.DeviceClasses, objs.ResourceClaimTemplates)
	for _, b := range all {
		before := b.DeepCopy()
		var tmpl *v1.PodTemplate
		if cfg.Controller {
			tmpl = control(cfg, b, devices, now)
		} else if ref := b.Status.PodTemplateRef; ref != nil {
			tmpl, _ = cfg.Templates.PodTemplates(b.Namespace).Get(ref.Name)
		}
		if cfg.Injection {
			l.Pods = append(l.Pods, inject(b, tmpl, now)...)
		}
		l.Buffers[b.Key()] = b
		if !equality.Semantic.DeepEqual(before.Status, b.Status) {
			if err := cfg.Client.UpdateStatus(ctx, b); err != nil {
				l.Errors = append(l.Errors, fmt.Errorf("CapacityBuffer %s: write status: %w", b.Key(), err))
			}
		}
	}
	return l, nil
}

// control is the buffer controller's work on b: the pod template and the
// replicas, or why not, in b's status. It returns the template.
func control(cfg Config, b *cb.CapacityBuffer, devices cb.Devices, now time.Time) *v1.PodTemplate {
	notReady := func(err error) *v1.PodTemplate {
		b.Status.PodTemplateRef, b.Status.Replicas, b.Status.PodTemplateGeneration = nil, nil, nil
		setCondition(b, cb.ReadyForProvisioning, metav1.ConditionFalse, cb.ReasonError, "Buffer not ready for provisioning: "+err.Error(), now)
		return nil
	}
	if b.Spec.ScalableRef != nil {
		return notReady(&cb.Error{Buffer: b.Key(), Field: "spec.scalableRef",
			Detail: "draxr does not read workloads' templates yet: name a PodTemplate in spec.podTemplateRef"})
	}
	if b.Spec.PodTemplateRef == nil {
		return notReady(&cb.Error{Buffer: b.Key(), Field: "spec", Detail: "names neither a podTemplateRef nor a scalableRef"})
	}
	tmpl, err := cfg.Templates.PodTemplates(b.Namespace).Get(b.Spec.PodTemplateRef.Name)
	if err != nil {
		return notReady(&cb.Error{Buffer: b.Key(), Field: "spec.podTemplateRef.name",
			Detail: fmt.Sprintf("PodTemplate %s/%s not found", b.Namespace, b.Spec.PodTemplateRef.Name)})
	}
	pods := cb.Pods(b, &tmpl.Template, 1)
	n, err := cb.Replicas(b, pods[0], nil, devices)
	if err != nil {
		return notReady(err)
	}
	b.Status.PodTemplateRef = &cb.LocalObjectRef{Name: tmpl.Name}
	b.Status.Replicas = ptr.To(n)
	b.Status.PodTemplateGeneration = ptr.To(tmpl.Generation)
	b.Status.ProvisioningStrategy = ptr.To(b.Strategy())
	setCondition(b, cb.ReadyForProvisioning, metav1.ConditionTrue, cb.ReasonAttributesSetSuccessfully, "ready", now)
	return tmpl
}

// inject is CA's injection for b: its pods, and its Provisioning
// condition.
func inject(b *cb.CapacityBuffer, tmpl *v1.PodTemplate, now time.Time) []*v1.Pod {
	ready := meta.IsStatusConditionTrue(b.Status.Conditions, cb.ReadyForProvisioning)
	switch {
	case !ready || b.Status.Replicas == nil:
		setCondition(b, cb.Provisioning, metav1.ConditionFalse, cb.ReasonNotReadyForProvisioning, "CapacityBuffer is not ready for provisioning", now)
		return nil
	case *b.Status.Replicas == 0:
		setCondition(b, cb.Provisioning, metav1.ConditionFalse, cb.ReasonBufferIsEmpty, "CapacityBuffer has zero replicas", now)
		return nil
	case tmpl == nil:
		setCondition(b, cb.Provisioning, metav1.ConditionFalse, cb.ReasonFailedToGetPodTemplate,
			"failed to get pod template with error: "+errors.New("not found").Error(), now)
		return nil
	}
	setCondition(b, cb.Provisioning, metav1.ConditionTrue, cb.ReasonFakePodsInjected, "", now)
	pods := cb.Pods(b, &tmpl.Template, *b.Status.Replicas)
	for _, p := range pods {
		p.CreationTimestamp = metav1.NewTime(now)
	}
	return pods
}

func setCondition(b *cb.CapacityBuffer, t string, s metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(now)})
}

// Ref is the buffer with its kind set, for events.
func Ref(b *cb.CapacityBuffer) *cb.CapacityBuffer {
	out := b.DeepCopy()
	out.APIVersion, out.Kind = cb.Group+"/"+cb.Version, cb.Kind
	return out
}
