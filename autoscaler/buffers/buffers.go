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
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/utils/ptr"

	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/view"
)

// Config is what the step reads and writes through, and CA's flags.
type Config struct {
	// Cluster holds the batch kinds of the loop's View: CapacityBuffers
	// (unstructured), the PodTemplates and workloads a buffer names, and
	// the ResourceQuotas that cap buffers. A nil workload or quota lister
	// answers "not found" or "none".
	Cluster view.View
	Client  StatusWriter
	// Templates keeps the PodTemplate of each scalableRef buffer, as CA's
	// controller does; nil keeps none (the pods come from the workload's
	// template, and the status names no template).
	Templates TemplateWriter
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
	_, err = w.c.Resource(cb.GroupVersionResource()).Namespace(b.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
	return err
}

// DryRunWriter writes nothing: a dry run (shadow mode) keeps the
// buffers' status as the acting autoscaler writes it.
func DryRunWriter() StatusWriter { return dryRunWriter{} }

type dryRunWriter struct{}

func (dryRunWriter) UpdateStatus(context.Context, *cb.CapacityBuffer) error { return nil }

// TemplateWriter creates or updates a managed PodTemplate and returns it
// as stored.
type TemplateWriter interface {
	Ensure(ctx context.Context, want *v1.PodTemplate) (*v1.PodTemplate, error)
}

// NewTemplateWriter writes through the client; the current templates are
// read from the informer's lister, so a steady loop writes nothing.
func NewTemplateWriter(c kubernetes.Interface, current corelisters.PodTemplateLister) TemplateWriter {
	return templateWriter{c: c, current: current}
}

type templateWriter struct {
	c       kubernetes.Interface
	current corelisters.PodTemplateLister
	dryRun  bool
}

// DryRunTemplates writes nothing: a dry run (shadow mode) serves buffers
// from the templates as they are, or would be once written.
func DryRunTemplates(current corelisters.PodTemplateLister) TemplateWriter {
	return templateWriter{current: current, dryRun: true}
}

func (w templateWriter) Ensure(ctx context.Context, want *v1.PodTemplate) (*v1.PodTemplate, error) {
	want = want.DeepCopy()
	// As the API server stores it, so that an unchanged workload compares
	// equal and a steady loop writes nothing.
	corev1defaults.SetObjectDefaults_PodTemplate(want)
	have, err := w.current.PodTemplates(want.Namespace).Get(want.Name)
	if apierrors.IsNotFound(err) && !w.dryRun {
		created, err := w.c.CoreV1().PodTemplates(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Created by an earlier loop, not yet in the informer: served
			// as written; the next loop compares it.
			return want, nil
		}
		return created, err
	}
	switch {
	case apierrors.IsNotFound(err) && w.dryRun:
		return want, nil
	case err != nil:
		return nil, err
	case equality.Semantic.DeepEqual(have.Template, want.Template) && equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences):
		return have, nil
	case w.dryRun:
		return want, nil
	}
	update := have.DeepCopy()
	update.OwnerReferences, update.Template = want.OwnerReferences, want.Template
	return w.c.CoreV1().PodTemplates(want.Namespace).Update(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager})
}

const fieldManager = "draxr-autoscaler"

// Loop is one loop's buffers.
type Loop struct {
	// Pods are the ready buffers' in-memory pods, created now (after every
	// real pod: real pods take free room first).
	Pods []*v1.Pod
	// Buffers are the buffers served, by namespace/name.
	Buffers map[string]*cb.CapacityBuffer
	Errors  []error
	// inShared: the pods that fit are placed in the loop's shared
	// simulation itself; unplaced are those that did not fit.
	inShared bool
	unplaced []*v1.Pod
}

// Run reads the buffers, sets their status (controller) and makes the
// pods of those ready (injection). objs are the loop's cluster objects
// (DeviceClasses and claim templates count devices). One bad buffer gets
// its condition; the others go on.
func Run(ctx context.Context, cfg Config, objs *input.Objects, now time.Time) (*Loop, error) {
	list, err := cfg.Cluster.CapacityBuffers.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list CapacityBuffers: %w", err)
	}
	l := &Loop{Buffers: map[string]*cb.CapacityBuffer{}}
	var all []*cb.CapacityBuffer
	for _, o := range list {
		b, ok, err := cb.FromLister(o)
		if err != nil {
			l.Errors = append(l.Errors, err)
			continue
		}
		if ok && b.Strategy() == cb.ActiveCapacity {
			all = append(all, b)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Key() < all[j].Key() })
	devices := cb.NewDevices(objs.DeviceClasses, objs.ResourceClaimTemplates)
	src := cb.Sources{Templates: func(ns, name string) *v1.PodTemplate {
		t, err := cfg.Cluster.PodTemplates.PodTemplates(ns).Get(name)
		if err != nil {
			return nil
		}
		return t
	}, Workloads: cfg.workload}
	if cfg.Templates != nil {
		src.Manage = func(t *v1.PodTemplate) (*v1.PodTemplate, error) { return cfg.Templates.Ensure(ctx, t) }
	}
	var quotas []*v1.ResourceQuota
	if cfg.Cluster.ResourceQuotas != nil {
		if quotas, err = cfg.Cluster.ResourceQuotas.List(labels.Everything()); err != nil {
			return nil, fmt.Errorf("list ResourceQuotas: %w", err)
		}
	}
	before := make([]*cb.CapacityBuffer, len(all))
	for i, b := range all {
		before[i] = b.DeepCopy()
	}
	l.Pods = cb.ServeAll(all, src, devices, quotas, cb.Options{Controller: cfg.Controller, Injection: cfg.Injection}, now)
	for i, b := range all {
		l.Buffers[b.Key()] = b
		if !equality.Semantic.DeepEqual(before[i].Status, b.Status) {
			if err := cfg.Client.UpdateStatus(ctx, b); err != nil {
				l.Errors = append(l.Errors, fmt.Errorf("CapacityBuffer %s: write status: %w", b.Key(), err))
			}
		}
	}
	return l, nil
}

// workload finds a scalableRef's pod template and replicas in the
// listers.
func (cfg Config) workload(ns string, ref cb.ScalableRef) (*v1.PodTemplateSpec, int32, bool) {
	switch ref.Kind {
	case "Deployment":
		if cfg.Cluster.Deployments != nil {
			if d, err := cfg.Cluster.Deployments.Deployments(ns).Get(ref.Name); err == nil {
				return &d.Spec.Template, ptr.Deref(d.Spec.Replicas, 1), true
			}
		}
	case "ReplicaSet":
		if cfg.Cluster.ReplicaSets != nil {
			if r, err := cfg.Cluster.ReplicaSets.ReplicaSets(ns).Get(ref.Name); err == nil {
				return &r.Spec.Template, ptr.Deref(r.Spec.Replicas, 1), true
			}
		}
	case "StatefulSet":
		if cfg.Cluster.StatefulSets != nil {
			if s, err := cfg.Cluster.StatefulSets.StatefulSets(ns).Get(ref.Name); err == nil {
				return &s.Spec.Template, ptr.Deref(s.Spec.Replicas, 1), true
			}
		}
	case "Job":
		if cfg.Cluster.Jobs != nil {
			if j, err := cfg.Cluster.Jobs.Jobs(ns).Get(ref.Name); err == nil {
				return &j.Spec.Template, ptr.Deref(j.Spec.Parallelism, 1), true
			}
		}
	}
	return nil, 0, false
}

// Ref is the buffer with its kind set, for events.
func Ref(b *cb.CapacityBuffer) *cb.CapacityBuffer {
	out := b.DeepCopy()
	out.APIVersion, out.Kind = cb.Group+"/"+cb.Version, cb.Kind
	return out
}
