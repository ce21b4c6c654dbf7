package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/scaleup"
)

// Pods below --expendable-pods-priority-cutoff trigger no scale-up; each
// gets a NotTriggerScaleUp event saying why.
func TestLoopExpendablePodsTriggerNoScaleUp(t *testing.T) {
	pods := unschedulablePods(4)
	for _, o := range pods {
		o.(*v1.Pod).Spec.Priority = ptr.To(int32(-100))
	}
	a, provider, _, recorder := setup(t, pods...)
	a.cfg.Pods = &scaleup.Flags{ExpendablePodsPriorityCutoff: scaleup.DefaultExpendablePodsPriorityCutoff}
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	// No IncreaseSize is expected: gomock fails the test if it is called.
	res, err := a.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.ScaleUp != nil {
		t.Fatalf("scale-up = %+v, want none for expendable pods", res.ScaleUp)
	}
	n := 0
	for _, e := range events(recorder) {
		if strings.Contains(e, "NotTriggerScaleUp") && strings.Contains(e, "priority -100 is below --expendable-pods-priority-cutoff -10") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("NotTriggerScaleUp events naming the cutoff = %d, want 4", n)
	}
}

// --new-pod-scale-up-delay: young pods wait for a later loop, then scale up.
func TestLoopNewPodScaleUpDelay(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pods := unschedulablePods(8)
	for _, o := range pods {
		o.(*v1.Pod).CreationTimestamp = metav1.NewTime(created)
	}
	a, provider, group, _ := setup(t, pods...)
	now := created.Add(30 * time.Second)
	a.cfg.Now = func() time.Time { return now }
	a.cfg.NewPodScaleUpDelay = time.Minute
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).Times(2)
	res, err := a.RunOnce(context.Background())
	if err != nil || res.ScaleUp != nil {
		t.Fatalf("30s after creation: scale-up %+v (%v), want none yet", res.ScaleUp, err)
	}
	now = created.Add(2 * time.Minute)
	group.EXPECT().IncreaseSize(gomock.Any(), 1).Return(nil)
	res, err = a.RunOnce(context.Background())
	if err != nil || res.ScaleUp == nil || res.ScaleUp.NewNodes != 1 {
		t.Fatalf("2m after creation: scale-up %+v (%v), want gpu +1", res.ScaleUp, err)
	}
}

// --write-status-configmap=false (StatusName ""): no ConfigMap is written.
func TestLoopWithoutStatusConfigMap(t *testing.T) {
	a, provider, group, _ := setup(t, unschedulablePods(8)...)
	a.cfg.StatusName = ""
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	group.EXPECT().IncreaseSize(gomock.Any(), 1).Return(nil)
	if _, err := a.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	cms, err := a.cfg.Client.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(cms.Items) != 0 {
		t.Fatalf("ConfigMaps = %v (%v), want none written", cms, err)
	}
}
