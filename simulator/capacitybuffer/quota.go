package capacitybuffer

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	quotacore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/utils/clock"
)

// ApplyQuotas caps the replicas of ready buffers by their namespaces'
// ResourceQuotas, as CA's buffer controller does: buffers oldest first
// (then by name), each taking what the quotas leave after the pods that
// use them and the buffers before it; a buffer cut down says so
// (LimitedByQuotas=True, reason ResourceQuotasAllocated, naming the
// quotas), others get LimitedByQuotas=False. podOf is the pod a buffer
// stands for (nil: none known, the buffer is left as it is). A quota
// counts a buffer's pod by its scopes and scope selector (scopesMatch).
func ApplyQuotas(buffers []*CapacityBuffer, podOf func(*CapacityBuffer) *v1.Pod, quotas []*v1.ResourceQuota, now time.Time) {
	// What the buffers before take of each quota, by quota UID.
	reserved := map[types.UID]v1.ResourceList{}
	for _, b := range oldestFirst(buffers) {
		if b.Status.Replicas == nil {
			continue
		}
		pod := podOf(b)
		if pod == nil {
			continue
		}
		requests := quotaRequests(pod)
		if len(requests) == 0 {
			continue
		}
		want := int64(*b.Status.Replicas)
		allowed := want
		var blocking []string
		matching := matchingQuotas(quotas, b, pod)
		for _, q := range matching {
			fit := quotaFit(q, requests, reserved[q.UID])
			if fit < want {
				blocking = append(blocking, q.Name)
			}
			allowed = min(allowed, fit)
		}
		if allowed < want {
			sort.Strings(blocking)
			b.Status.Replicas = ptr32(int32(allowed))
			setCondition(b, LimitedByQuotas, metav1.ConditionTrue, ReasonResourceQuotasAllocated,
				fmt.Sprintf("Buffer replicas limited from %d to %d due to quotas: %s", want, allowed, strings.Join(blocking, ", ")), now)
		} else {
			setCondition(b, LimitedByQuotas, metav1.ConditionFalse, ReasonResourceQuotasAllocated, "", now)
		}
		reserve(reserved, matching, requests, allowed)
	}
}

// oldestFirst is the buffers in the order they take from the quotas:
// oldest first, then by name.
func oldestFirst(buffers []*CapacityBuffer) []*CapacityBuffer {
	sorted := append([]*CapacityBuffer(nil), buffers...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Key() < b.Key()
	})
	return sorted
}

// matchingQuotas are the quotas of b's namespace that count its pod.
func matchingQuotas(quotas []*v1.ResourceQuota, b *CapacityBuffer, pod *v1.Pod) []*v1.ResourceQuota {
	var matching []*v1.ResourceQuota
	for _, q := range quotas {
		if q.Namespace != b.Namespace {
			continue
		}
		if ok, err := scopesMatch(q, pod); err != nil || !ok {
			if err != nil { // left out, as CA leaves it; the API server rejects such quotas
				klog.Background().Error(err, "ResourceQuota not applied to a CapacityBuffer: spec.scopeSelector", "resourceQuota", klog.KObj(q), "capacityBuffer", klog.KObj(b))
			}
			continue
		}
		matching = append(matching, q)
	}
	return matching
}

// quotaFit is how many pods of requests quota q has room for, after its
// use and what earlier buffers reserved of it.
func quotaFit(q *v1.ResourceQuota, requests, reserved v1.ResourceList) int64 {
	fit := int64(math.MaxInt32)
	for name, hard := range q.Status.Hard {
		req, ok := requests[name]
		if !ok || req.IsZero() {
			continue
		}
		left := hard.DeepCopy()
		if used, ok := q.Status.Used[name]; ok {
			left.Sub(used)
		}
		if r, ok := reserved[name]; ok {
			left.Sub(r)
		}
		n := int64(0)
		if left.Sign() > 0 {
			n = left.MilliValue() / req.MilliValue()
		}
		fit = min(fit, n)
	}
	return fit
}

// reserve takes replicas pods of requests from each matching quota, for
// the buffers after.
func reserve(reserved map[types.UID]v1.ResourceList, matching []*v1.ResourceQuota, requests v1.ResourceList, replicas int64) {
	for _, q := range matching {
		if reserved[q.UID] == nil {
			reserved[q.UID] = v1.ResourceList{}
		}
		for name := range q.Status.Hard {
			req, ok := requests[name]
			if !ok {
				continue
			}
			total := reserved[q.UID][name]
			total.Add(*resource.NewMilliQuantity(req.MilliValue()*replicas, req.Format))
			reserved[q.UID][name] = total
		}
	}
}

// quotaRequests is what the pod counts against quotas: each resource it
// requests under its own name and as requests.<name>.
func quotaRequests(pod *v1.Pod) v1.ResourceList {
	out := v1.ResourceList{}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		out[name] = q
		if !strings.HasPrefix(string(name), "requests.") {
			out["requests."+name] = q
		}
	}
	return out
}

// scopesMatch says whether the quota counts the pod, by the API server's
// own pod quota evaluator: every scope (Terminating, BestEffort,
// PriorityClass, CrossNamespacePodAffinity and their negations) and scope
// selector. A buffer's pod is counted as not terminating whatever its
// template's activeDeadlineSeconds, as CA counts it.
func scopesMatch(q *v1.ResourceQuota, pod *v1.Pod) (bool, error) {
	p := *pod
	p.Spec.ActiveDeadlineSeconds = nil
	return quotacore.NewPodEvaluator(nil, clock.RealClock{}).Matches(q, &p)
}

func ptr32(v int32) *int32 { return &v }
