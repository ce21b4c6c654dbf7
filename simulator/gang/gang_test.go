package gang

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func member(name, group, node string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"},
		Spec:   v1.PodSpec{NodeName: node, SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}},
		Status: v1.PodStatus{Phase: phase}}
}

func volcanoMember(name, group, scheduler string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Annotations: map[string]string{VolcanoGroupAnnotation: group}},
		Spec: v1.PodSpec{SchedulerName: scheduler}}
}

// The index counts a gang's live pods and where they run; finished pods
// do not count; a group without a gang policy makes no gang; Volcano's
// annotation counts only for the schedulers named.
func TestIndex(t *testing.T) {
	groups := []*schedulingv1beta1.PodGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"}, Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "ml"}},
	}
	pods := []*v1.Pod{
		member("a", "train", "n1", v1.PodRunning), member("b", "train", "n2", v1.PodRunning),
		member("c", "train", "", v1.PodPending), member("done", "train", "n1", v1.PodSucceeded),
		member("x", "basic", "", v1.PodPending), member("orphan", "gone", "", v1.PodPending),
		volcanoMember("v0", "vc", "volcano"), volcanoMember("v1", "vc", "volcano"), volcanoMember("other", "vc", "default-scheduler"),
	}
	ix := NewIndex(Sources{PodGroups: groups, Volcano: []VolcanoGroup{{Namespace: "ml", Name: "vc", MinMember: 3}},
		VolcanoSchedulers: []string{"volcano"}}, pods)

	g, problem := ix.Of(pods[2])
	if problem != nil || g == nil || g.Pods != 3 || g.Scheduled != 2 || g.Need() != 1 {
		t.Fatalf("train: %+v, %+v; want 3 pods, 2 scheduled, 1 more needed", g, problem)
	}
	if n := g.ScheduledOutside("n1", nil); n != 1 {
		t.Errorf("scheduled outside n1: %d, want 1", n)
	}
	if on := ix.OnNode("n1"); len(on) != 1 || on[0] != g {
		t.Errorf("gangs on n1: %v, want train", on)
	}
	if g, problem := ix.Of(pods[4]); g != nil || problem != nil {
		t.Errorf("a PodGroup without a gang policy: %+v %+v, want no gang", g, problem)
	}
	if _, problem := ix.Of(pods[5]); problem == nil || problem.Code != PodGroupNotFound ||
		!strings.Contains(problem.Message, "spec.schedulingGroup.podGroupName names PodGroup ml/gone") {
		t.Errorf("missing group: %+v", problem)
	}
	vg, problem := ix.Of(pods[6])
	if vg == nil || problem == nil || problem.Code != GangIncomplete || !strings.Contains(problem.Message, "spec.minMember is 3 but only 2 pods name it") {
		t.Errorf("Volcano group of 2 pods (the third is another scheduler's): %+v %+v", vg, problem)
	}
	if g, problem := ix.Of(pods[8]); g != nil || problem != nil {
		t.Errorf("a pod of another scheduler with Volcano's annotation: %+v %+v, want no gang", g, problem)
	}
}
