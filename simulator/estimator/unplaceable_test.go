package estimator

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// Pods of one kind share a "fits nowhere" verdict unless they differ in a
// label some selector reads: a label nothing reads (a StatefulSet's
// pod-name, a Job's index) keeps the kind's fast path.
func TestUnplaceableKeysByTheLabelsSelectorsRead(t *testing.T) {
	term := func(key string) v1.PodAffinityTerm {
		return v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpExists}}}}
	}
	withAnti := func(p *v1.Pod, key string) *v1.Pod {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(key)}}}
		return p
	}
	withAffinity := func(p *v1.Pod, key string) *v1.Pod {
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term(key)}}}
		return p
	}
	withSpread := func(when v1.UnsatisfiableConstraintAction) func(*v1.Pod) *v1.Pod {
		return func(p *v1.Pod) *v1.Pod {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname,
				WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
			return p
		}
	}
	cases := []struct {
		name string
		// repel runs a pod whose anti-affinity reads app.
		repel bool
		// shape makes the pods of the kind; other is pending too.
		shape func(*v1.Pod) *v1.Pod
		other *v1.Pod
		// held: whether a pod labelled app=web idx=1, then one labelled
		// app=db idx=0, shares the verdict of a pod labelled app=web idx=0.
		held [2]bool
	}{
		{name: "nothing reads labels", shape: func(p *v1.Pod) *v1.Pod { return p }, held: [2]bool{true, true}},
		{name: "a running pod's anti-affinity reads app", repel: true, shape: func(p *v1.Pod) *v1.Pod { return p }, held: [2]bool{true, false}},
		{name: "a pending pod's anti-affinity reads idx", shape: func(p *v1.Pod) *v1.Pod { return p },
			other: withAnti(fx.Pod("guard", 100, nil), "idx"), held: [2]bool{false, true}},
		{name: "their own affinity reads app", shape: func(p *v1.Pod) *v1.Pod { return withAffinity(p, "app") }, held: [2]bool{true, false}},
		{name: "their own hard spread constraint reads app", shape: withSpread(v1.DoNotSchedule), held: [2]bool{true, false}},
		{name: "a soft spread constraint only scores", shape: withSpread(v1.ScheduleAnyway), held: [2]bool{true, true}},
		{name: "their own anti-affinity reads idx", shape: func(p *v1.Pod) *v1.Pod { return withAnti(p, "idx") }, held: [2]bool{false, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newEngine(t)
			if tc.repel {
				repelling(t, h)
			}
			ps := pods("web", 3, 100, nil)
			for i, l := range []map[string]string{{"app": "web", "idx": "0"}, {"app": "web", "idx": "1"}, {"app": "db", "idx": "0"}} {
				ps[i].Labels = l
				ps[i] = tc.shape(ps[i])
			}
			all := ps
			if tc.other != nil {
				all = append([]*v1.Pod{tc.other}, ps...)
			}
			kinds := NewKinds(h.Snapshot(), all)
			u := NewUnplaceable(h, kinds, all)
			if u.Holds(ps[0]) {
				t.Fatal("a pod is held before any failed")
			}
			u.Add(ps[0])
			if !u.Holds(ps[0]) {
				t.Fatal("the pod that failed is not held")
			}
			if got := [2]bool{u.Holds(ps[1]), u.Holds(ps[2])}; got != tc.held {
				t.Errorf("held %v, want %v", got, tc.held)
			}
		})
	}
}
