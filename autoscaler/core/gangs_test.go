package core

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/test/fakeprovider"
)

// gangObjects are a PodGroup of minCount n and n unschedulable one-GPU
// pods that name it.
func gangObjects(n int) []runtime.Object {
	objs := []runtime.Object{&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(n)}}}}}
	for _, o := range unschedulablePods(n) {
		o.(*v1.Pod).Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		objs = append(objs, o)
	}
	return objs
}

// With GenericWorkload on, a gang's nodes are asked for in one atomic
// call, and a gang one node over max gets none: every pod says why.
func TestGangScaleUp(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	for _, tc := range []struct {
		name       string
		pods       int
		wantAtomic []int
	}{
		{name: "16 pods: 2 nodes at once", pods: 16, wantAtomic: []int{2}},
		{name: "40 pods: one node over max", pods: 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFailureEnv(t, gangObjects(tc.pods)...)
			g := groupOf8GPUs("gpu", 8)
			g.Spec.MaxSize = 4
			group := e.provider.AddGroup(g, fakeprovider.Faults{})
			if _, err := e.a.RunOnce(e.ctx); err != nil {
				t.Fatal(err)
			}
			if len(group.Increases()) != 0 || len(group.AtomicIncreases()) != len(tc.wantAtomic) ||
				(len(tc.wantAtomic) > 0 && group.AtomicIncreases()[0] != tc.wantAtomic[0]) {
				t.Fatalf("atomic increases %v, increases %v; want atomic %v only", group.AtomicIncreases(), group.Increases(), tc.wantAtomic)
			}
			if tc.wantAtomic != nil {
				if evs := e.events(EventTriggeredScaleUp); len(evs) != tc.pods {
					t.Errorf("%d TriggeredScaleUp events, want one per pod of the gang", len(evs))
				}
				return
			}
			evs := e.events(EventNotTriggerScaleUp)
			if len(evs) != tc.pods {
				t.Fatalf("%d NotTriggerScaleUp events, want %d", len(evs), tc.pods)
			}
			for _, ev := range evs {
				if !strings.Contains(ev, "PodGroup default/train is a gang of minCount 40") || !strings.Contains(ev, "max size 4 leaves room for 4") {
					t.Fatalf("event %q does not name the gang and the bound", ev)
				}
			}
		})
	}
}
