package scaleup

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/estimator"
)

// SortLargestFirst orders pods by extended resources (devices), then CPU,
// then memory, all descending; alike pods stay together and ties keep
// namespace/name order, so plans are deterministic.
func SortLargestFirst(pods []*v1.Pod, kinds *estimator.Kinds) []*v1.Pod {
	type keyed struct {
		pod              *v1.Pod
		devices          int64
		milliCPU, memory int64
		kind             string
	}
	ks := make([]keyed, len(pods))
	for i, pod := range pods {
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		k := keyed{pod: pod, milliCPU: req.Cpu().MilliValue(), memory: req.Memory().Value(), kind: kinds.Of(pod)}
		for name, q := range req {
			if dynres.IsExtended(name) {
				k.devices += q.Value()
			}
		}
		k.devices += int64(len(pod.Spec.ResourceClaims)) // a claim asks for at least one device
		ks[i] = k
	}
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		switch {
		case a.devices != b.devices:
			return a.devices > b.devices
		case a.milliCPU != b.milliCPU:
			return a.milliCPU > b.milliCPU
		case a.memory != b.memory:
			return a.memory > b.memory
		case a.kind != b.kind:
			return a.kind < b.kind
		case a.pod.Namespace != b.pod.Namespace:
			return a.pod.Namespace < b.pod.Namespace
		}
		return a.pod.Name < b.pod.Name
	})
	out := make([]*v1.Pod, len(ks))
	for i := range ks {
		out[i] = ks[i].pod
	}
	return out
}

// SortSchedulerQueue orders pods as kube-scheduler's default queue takes
// them: higher priority first, then earlier creation, then name.
func SortSchedulerQueue(pods []*v1.Pod) []*v1.Pod {
	out := append([]*v1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		pa, pb := ptr.Deref(a.Spec.Priority, 0), ptr.Deref(b.Spec.Priority, 0)
		switch {
		case pa != pb:
			return pa > pb
		case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		case a.Namespace != b.Namespace:
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}
