// Package capacitybuffer is CA's CapacityBuffer API
// (autoscaling.x-k8s.io/v1beta1; v1alpha1, deprecated, has the same
// schema), written from CA's definition: the version of CA's API module
// the proxy serves predates it. It also holds what a buffer stands for:
// how many pods, and those pods, which take devices as real pods do
// (draxr counts limits given in DRA-backed extended resource names in
// devices). It reads and writes nothing in the cluster.
package capacitybuffer

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API's names, CA's.
const (
	Group    = "autoscaling.x-k8s.io"
	Version  = "v1beta1"
	Kind     = "CapacityBuffer"
	Resource = "capacitybuffers"
	// ActiveCapacity is the provisioning strategy draxr (as CA) serves,
	// and the default.
	ActiveCapacity = "buffer.x-k8s.io/active-capacity"
)

// GroupVersionResource is the served resource.
func GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}
}

// Condition types and reasons, CA's.
const (
	ReadyForProvisioning = "ReadyForProvisioning"
	Provisioning         = "Provisioning"
	LimitedByQuotas      = "LimitedByQuotas"

	ReasonAttributesSetSuccessfully = "AttributesSetSuccessfully"
	// ReasonError is CA's reason for a buffer not ready (a literal).
	ReasonError                   = "error"
	ReasonResourceQuotasAllocated = "ResourceQuotasAllocated"
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferIsEmpty           = "BufferIsEmpty"
	ReasonFailedToGetPodTemplate  = "FailedToGetPodTemplate"
	ReasonFailedToMakeFakePods    = "FailedToMakeFakePods"
	ReasonFakePodsInjected        = "FakePodsInjected"
)

// CapacityBuffer keeps room for pods that do not exist yet.
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	Name string `json:"name"`
}

// ScalableRef names a workload with a scale subresource.
type ScalableRef struct {
	APIGroup string `json:"apiGroup,omitempty"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// Spec is what the buffer asks for.
type Spec struct {
	ProvisioningStrategy *string         `json:"provisioningStrategy,omitempty"`
	PodTemplateRef       *LocalObjectRef `json:"podTemplateRef,omitempty"`
	ScalableRef          *ScalableRef    `json:"scalableRef,omitempty"`
	Replicas             *int32          `json:"replicas,omitempty"`
	Percentage           *int32          `json:"percentage,omitempty"`
	Limits               v1.ResourceList `json:"limits,omitempty"`
}

// Status is what the buffer controller and the autoscaler made of it.
type Status struct {
	PodTemplateRef        *LocalObjectRef    `json:"podTemplateRef,omitempty"`
	Replicas              *int32             `json:"replicas,omitempty"`
	PodTemplateGeneration *int64             `json:"podTemplateGeneration,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
	ProvisioningStrategy  *string            `json:"provisioningStrategy,omitempty"`
}

// Strategy is the buffer's provisioning strategy, the default when unset.
func (b *CapacityBuffer) Strategy() string {
	if b.Spec.ProvisioningStrategy == nil || *b.Spec.ProvisioningStrategy == "" {
		return ActiveCapacity
	}
	return *b.Spec.ProvisioningStrategy
}

// Key is namespace/name.
func (b *CapacityBuffer) Key() string { return b.Namespace + "/" + b.Name }

// DeepCopyObject is DeepCopy as a runtime.Object (events name buffers).
func (b *CapacityBuffer) DeepCopyObject() runtime.Object { return b.DeepCopy() }

// DeepCopy copies the buffer.
func (b *CapacityBuffer) DeepCopy() *CapacityBuffer {
	out := *b
	out.ObjectMeta = *b.ObjectMeta.DeepCopy()
	out.Spec = Spec{ProvisioningStrategy: copyPtr(b.Spec.ProvisioningStrategy), PodTemplateRef: copyPtr(b.Spec.PodTemplateRef),
		ScalableRef: copyPtr(b.Spec.ScalableRef), Replicas: copyPtr(b.Spec.Replicas), Percentage: copyPtr(b.Spec.Percentage),
		Limits: b.Spec.Limits.DeepCopy()}
	out.Status = Status{PodTemplateRef: copyPtr(b.Status.PodTemplateRef), Replicas: copyPtr(b.Status.Replicas),
		PodTemplateGeneration: copyPtr(b.Status.PodTemplateGeneration), ProvisioningStrategy: copyPtr(b.Status.ProvisioningStrategy)}
	for _, c := range b.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, *c.DeepCopy())
	}
	return &out
}

// FromLister decodes an object a dynamic informer's lister holds; ok is
// false for anything not unstructured. The error names the buffer.
func FromLister(o runtime.Object) (b *CapacityBuffer, ok bool, err error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, false, nil
	}
	b = &CapacityBuffer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, true, fmt.Errorf("CapacityBuffer %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return b, true, nil
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
