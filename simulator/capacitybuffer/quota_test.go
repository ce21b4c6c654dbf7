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
