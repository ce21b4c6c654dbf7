package capacitybuffer

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// Quotas cap buffers oldest first: the first takes what it asks, the next
// what is left, and says which quota cut it down.
func TestApplyQuotas(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quota := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "ml", UID: "q"},
		Status: v1.ResourceQuotaStatus{
			Hard: v1.ResourceList{"requests.example.com/gpu": resource.MustParse("10")},
			Used: v1.ResourceList{"requests.example.com/gpu": resource.MustParse("4")}}}
	other := quota.DeepCopy()
	other.Namespace, other.UID = "elsewhere", "o"
	mk := func(name string, age time.Duration) *CapacityBuffer {
		b := buffer(func(s *Spec) {})
		b.Name, b.CreationTimestamp, b.Status.Replicas = name, metav1.NewTime(now.Add(-age)), ptr.To[int32](4)
		return b
	}
	older, newer := mk("older", time.Hour), mk("newer", time.Minute)
	pod := fx.Pod("p", 100, fx.GPUs(fx.GPUResource, 1))
	ApplyQuotas([]*CapacityBuffer{newer, older}, func(*CapacityBuffer) *v1.Pod { return pod }, []*v1.ResourceQuota{quota, other}, now)
	if *older.Status.Replicas != 4 || meta.IsStatusConditionTrue(older.Status.Conditions, LimitedByQuotas) {
		t.Errorf("older: %d replicas, %+v; want 4, not limited", *older.Status.Replicas, older.Status.Conditions)
	}
	c := meta.FindStatusCondition(newer.Status.Conditions, LimitedByQuotas)
	if *newer.Status.Replicas != 2 || c == nil || c.Status != metav1.ConditionTrue ||
		c.Message != "Buffer replicas limited from 4 to 2 due to quotas: gpus" {
		t.Errorf("newer: %d replicas, %+v; want 2, limited by gpus", *newer.Status.Replicas, c)
	}
}

// A quota caps a buffer only when its scopes and scope selector count the
// buffer's pod, as the API server's quota admission would count it.
func TestApplyQuotasScopes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	highPod := fx.Pod("p", 100, fx.GPUs(fx.GPUResource, 1))
	highPod.Spec.PriorityClassName = "high"
	highPod.Spec.ActiveDeadlineSeconds = ptr.To[int64](600) // a buffer's pod is counted as not terminating
	crossNS := highPod.DeepCopy()
	crossNS.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: "zone", NamespaceSelector: &metav1.LabelSelector{}}}}}
	sel := func(scope v1.ResourceQuotaScope, op v1.ScopeSelectorOperator, values ...string) *v1.ScopeSelector {
		return &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{{ScopeName: scope, Operator: op, Values: values}}}
	}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		scopes   []v1.ResourceQuotaScope
		selector *v1.ScopeSelector
		want     int32
	}{
		{name: "no scope", pod: highPod, want: 6},
		{name: "priority class in", pod: highPod, selector: sel(v1.ResourceQuotaScopePriorityClass, v1.ScopeSelectorOpIn, "high"), want: 6},
		{name: "priority class not in", pod: highPod, selector: sel(v1.ResourceQuotaScopePriorityClass, v1.ScopeSelectorOpNotIn, "high"), want: 10},
		{name: "priority class exists", pod: highPod, selector: sel(v1.ResourceQuotaScopePriorityClass, v1.ScopeSelectorOpExists), want: 6},
		{name: "priority class does not exist", pod: highPod, selector: sel(v1.ResourceQuotaScopePriorityClass, v1.ScopeSelectorOpDoesNotExist), want: 10},
		{name: "cross-namespace affinity, pod without", pod: highPod, scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeCrossNamespacePodAffinity}, want: 10},
		{name: "cross-namespace affinity, pod with", pod: crossNS, scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeCrossNamespacePodAffinity}, want: 6},
		{name: "not terminating despite a deadline", pod: highPod, scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotTerminating}, want: 6},
		{name: "terminating", pod: highPod, scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeTerminating}, want: 10},
		{name: "best effort (the pod asks for cpu)", pod: highPod, scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}, want: 10},
		{name: "not best effort and priority class", pod: highPod, scopes: []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort},
			selector: sel(v1.ResourceQuotaScopePriorityClass, v1.ScopeSelectorOpIn, "high", "low"), want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quota := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: "ml", UID: "q"},
				Spec: v1.ResourceQuotaSpec{Scopes: tc.scopes, ScopeSelector: tc.selector},
				Status: v1.ResourceQuotaStatus{
					Hard: v1.ResourceList{"requests.example.com/gpu": resource.MustParse("10")},
					Used: v1.ResourceList{"requests.example.com/gpu": resource.MustParse("4")}}}
			b := buffer(func(s *Spec) {})
			b.Status.Replicas = ptr.To[int32](10)
			ApplyQuotas([]*CapacityBuffer{b}, func(*CapacityBuffer) *v1.Pod { return tc.pod }, []*v1.ResourceQuota{quota}, now)
			if *b.Status.Replicas != tc.want {
				t.Errorf("%d replicas, want %d (%+v)", *b.Status.Replicas, tc.want, b.Status.Conditions)
			}
			if limited := meta.IsStatusConditionTrue(b.Status.Conditions, LimitedByQuotas); limited != (tc.want < 10) {
				t.Errorf("LimitedByQuotas %v with %d replicas", limited, *b.Status.Replicas)
			}
		})
	}
}
