package capacitybuffer

import (
	"fmt"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/scheduler/classes"

	// Registers the v1 defaulting functions with legacyscheme.
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// Fake pods' annotation, CA's: drain and events know them by it.
const (
	PodTypeAnnotation = "podType"
	PodTypeBuffer     = "capacityBufferFakePod"
	safeToEvict       = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// Devices answers, for a DRA-backed extended resource name (explicit or
// deviceclass.resource.kubernetes.io/<class>), how many devices of the
// class it names pod takes (by that name or another of the class, or
// through its claims' templates); ok is false for names no DeviceClass
// backs.
type Devices func(pod *v1.Pod, name v1.ResourceName) (n int64, ok bool, err error)

// Error is a buffer draxr cannot serve, naming the field.
type Error struct {
	Buffer, Field, Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("CapacityBuffer %s: %s: %s", e.Buffer, e.Field, e.Detail)
}

// Replicas is how many pods the buffer stands for, CA's rule: the larger
// of spec.replicas and spec.percentage of the scalable object's replicas
// (rounded up), capped by spec.limits, floor(limit / what a pod asks) for
// each limit the pod asks for; limits alone give as many pods as fit.
// Beyond CA, a limit named by a DRA-backed extended resource counts
// devices, also those the pod takes through claims ("keep 16
// nvidia.com/gpu free" is 16 devices of the class behind the name).
// scalableReplicas is nil without a scalableRef.
func Replicas(b *CapacityBuffer, pod *v1.Pod, scalableReplicas *int32, devices Devices) (int32, error) {
	bad := func(field, format string, args ...any) error {
		return &Error{Buffer: b.Key(), Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	r := int64(-1)
	if b.Spec.Replicas != nil {
		r = max(0, int64(*b.Spec.Replicas))
	}
	if b.Spec.Percentage != nil {
		if b.Spec.ScalableRef == nil {
			return 0, bad("spec.percentage", "is a share of spec.scalableRef's replicas, and the buffer has no scalableRef")
		}
		if p, n := int64(*b.Spec.Percentage), int64(ptr.Deref(scalableReplicas, 0)); p > 0 && n > 0 {
			r = max(r, (p*n+99)/100)
		}
	}
	if len(b.Spec.Limits) == 0 {
		if r < 0 {
			return 0, bad("spec", "replicas, percentage and limits are not defined")
		}
		return int32(min(r, math.MaxInt32)), nil
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limit := int64(-1)
	names := make([]string, 0, len(b.Spec.Limits))
	for n := range b.Spec.Limits {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, name := range names {
		q := b.Spec.Limits[v1.ResourceName(name)]
		field := "spec.limits[" + name + "]"
		n, isDevice, err := devices(pod, v1.ResourceName(name))
		if err != nil {
			return 0, bad(field, "%v", err)
		}
		var fit int64
		switch req, asked := requests[v1.ResourceName(name)]; {
		case isDevice:
			if q.MilliValue()%1000 != 0 {
				return 0, bad(field, "%s is not a whole number of devices", q.String())
			}
			if n <= 0 {
				continue
			}
			fit = q.Value() / n
		case asked && req.MilliValue() > 0:
			fit = q.MilliValue() / req.MilliValue()
		default:
			continue
		}
		if limit < 0 || fit < limit {
			limit = fit
		}
	}
	if limit < 0 {
		return 0, bad("spec.limits", "names no resource the buffer's pod asks for")
	}
	if r >= 0 {
		limit = min(limit, r)
	}
	return int32(min(limit, math.MaxInt32)), nil
}

// Pods are n in-memory copies of the buffer's pod template, as CA makes
// them: capacity-buffer-<buffer>-<i> (i from 1), UID <buffer UID>-<i>,
// owned by the buffer, annotated as fake buffer pods and safe to evict
// (room kept for future pods may move), pending, with the API server's
// defaults.
func Pods(b *CapacityBuffer, tmpl *v1.PodTemplateSpec, n int32) []*v1.Pod {
	if n <= 0 {
		return nil
	}
	owner := metav1.OwnerReference{APIVersion: Group + "/" + Version, Kind: Kind, Name: b.Name, UID: b.UID, Controller: ptr.To(true)}
	// Defaults do not depend on a pod's name: one pod is defaulted and
	// copied, which costs a fraction of defaulting every copy.
	proto := &v1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	proto.GenerateName = ""
	proto.Namespace = b.Namespace
	proto.OwnerReferences = append(proto.OwnerReferences, owner)
	if proto.Annotations == nil {
		proto.Annotations = map[string]string{}
	}
	proto.Annotations[PodTypeAnnotation] = PodTypeBuffer
	proto.Annotations[safeToEvict] = "true"
	proto.Spec.NodeName = ""
	proto.CreationTimestamp = b.CreationTimestamp
	proto.Status = v1.PodStatus{Phase: v1.PodPending}
	legacyscheme.Scheme.Default(proto)
	pods := make([]*v1.Pod, 0, n)
	for i := int32(1); i <= n; i++ {
		pod := proto
		if i < n {
			pod = proto.DeepCopy()
		}
		pod.Name = fmt.Sprintf("capacity-buffer-%s-%d", b.Name, i)
		pod.UID = types.UID(fmt.Sprintf("%s-%d", b.UID, i))
		pods = append(pods, pod)
	}
	return pods
}

// IsBufferPod says whether pod is a buffer's in-memory pod.
func IsBufferPod(pod *v1.Pod) bool { return pod.Annotations[PodTypeAnnotation] == PodTypeBuffer }

// BufferOf is the name of the buffer a buffer pod stands for.
func BufferOf(pod *v1.Pod) string {
	for _, o := range pod.OwnerReferences {
		if o.Kind == Kind {
			return o.Name
		}
	}
	return ""
}

// ClaimDevices counts the devices of class a pod's claims from templates
// ask for (exact counts; a first-available request by its first choice).
// A request of all devices of the class has no count: an error.
func ClaimDevices(pod *v1.Pod, class string, templates func(ns, name string) *resourceapi.ResourceClaimTemplate) (int64, error) {
	var n int64
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		t := templates(pod.Namespace, *pc.ResourceClaimTemplateName)
		if t == nil {
			return 0, fmt.Errorf("the pod's claim %s names ResourceClaimTemplate %s/%s, which does not exist", pc.Name, pod.Namespace, *pc.ResourceClaimTemplateName)
		}
		for _, r := range t.Spec.Spec.Devices.Requests {
			cls, mode, count := "", resourceapi.DeviceAllocationModeExactCount, int64(1)
			switch {
			case r.Exactly != nil:
				cls, mode, count = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count
			case len(r.FirstAvailable) > 0:
				s := r.FirstAvailable[0]
				cls, mode, count = s.DeviceClassName, s.AllocationMode, s.Count
			}
			if cls != class {
				continue
			}
			if mode == resourceapi.DeviceAllocationModeAll {
				return 0, fmt.Errorf("ResourceClaimTemplate %s/%s asks for all devices of class %s: no count to divide a limit by", pod.Namespace, t.Name, class)
			}
			n += max(count, 1)
		}
	}
	return n, nil
}

// NewDevices is Devices over the cluster's DeviceClasses (with the KEP's
// name resolution) and ResourceClaimTemplates.
func NewDevices(classList []*resourceapi.DeviceClass, templateList []*resourceapi.ResourceClaimTemplate) Devices {
	idx := classes.NewIndex()
	for _, c := range classList {
		idx.Set(c)
	}
	byName := map[[2]string]*resourceapi.ResourceClaimTemplate{}
	for _, t := range templateList {
		byName[[2]string{t.Namespace, t.Name}] = t
	}
	lookup := func(ns, name string) *resourceapi.ResourceClaimTemplate { return byName[[2]string{ns, name}] }
	return func(pod *v1.Pod, name v1.ResourceName) (int64, bool, error) {
		c := idx.GetDeviceClass(name)
		if c == nil {
			return 0, false, nil
		}
		n, err := ClaimDevices(pod, c.Name, lookup)
		requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		for _, other := range idx.ResourceNames(c.Name) {
			if q, ok := requests[other]; ok {
				n += q.Value()
			}
		}
		return n, true, err
	}
}
