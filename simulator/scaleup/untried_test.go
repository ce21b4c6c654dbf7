package scaleup

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// Pods the scheduler never tries get a reason and no node.
func TestPodsTheSchedulerDoesNotTry(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*v1.Pod)
		served   []string
		flags    *Flags
		wantCode ReasonCode
		wantText string
	}{
		{name: "plain pod scales up", mutate: func(*v1.Pod) {}},
		{name: "empty schedulerName is default-scheduler", mutate: func(p *v1.Pod) { p.Spec.SchedulerName = "" }},
		{name: "gated pod", wantCode: SchedulingGated, wantText: "scheduling gates example.com/quota",
			mutate: func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/quota"}} }},
		{name: "being deleted", wantCode: BeingDeleted, wantText: "the pod is being deleted (since 2026-01-02T03:04:05Z): the scheduler does not try it",
			mutate: func(p *v1.Pod) {
				p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			}},
		{name: "other scheduler", wantCode: NotServedByScheduler, wantText: `schedulerName "volcano" is not a profile`,
			mutate: func(p *v1.Pod) { p.Spec.SchedulerName = "volcano" }},
		{name: "other scheduler served when named", served: []string{"default-scheduler", "volcano"},
			mutate: func(p *v1.Pod) { p.Spec.SchedulerName = "volcano" }},
		{name: "other scheduler bypassed", flags: &Flags{ExpendablePodsPriorityCutoff: -10, BypassedSchedulerNames: []string{"volcano"}},
			mutate: func(p *v1.Pod) { p.Spec.SchedulerName = "volcano" }},
		{name: "another scheduler bypassed", flags: &Flags{ExpendablePodsPriorityCutoff: -10, BypassedSchedulerNames: []string{"yunikorn"}},
			wantCode: NotServedByScheduler, wantText: `schedulerName "volcano" is not a profile`,
			mutate: func(p *v1.Pod) { p.Spec.SchedulerName = "volcano" }},
		{name: "below the expendable cutoff", flags: &Flags{ExpendablePodsPriorityCutoff: -10},
			wantCode: Expendable, wantText: "priority -11 is below --expendable-pods-priority-cutoff -10: expendable pods never trigger a scale-up",
			mutate: func(p *v1.Pod) { p.Spec.Priority = ptr.To(int32(-11)) }},
		{name: "at the expendable cutoff", flags: &Flags{ExpendablePodsPriorityCutoff: -10},
			mutate: func(p *v1.Pod) { p.Spec.Priority = ptr.To(int32(-10)) }},
		{name: "no priority is never expendable", flags: &Flags{ExpendablePodsPriorityCutoff: 100}, mutate: func(*v1.Pod) {}},
		{name: "a raised cutoff", flags: &Flags{ExpendablePodsPriorityCutoff: 1000},
			wantCode: Expendable, wantText: "priority 0 is below --expendable-pods-priority-cutoff 1000",
			mutate: func(p *v1.Pod) { p.Spec.Priority = ptr.To(int32(0)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, snapshot.New(), draGroup("gpu", 8, 10))
			p.SchedulerNames = tc.served
			if tc.flags != nil {
				tc.flags.Apply(p)
			}
			pods := replicas("train", 3, 100, fx.GPUs(fx.GPUResource, 1))
			for _, pod := range pods {
				pod.Spec.SchedulerName = v1.DefaultSchedulerName
				tc.mutate(pod)
			}
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCode == "" {
				if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 1 || len(plan.NoScaleUp) != 0 {
					t.Fatalf("plan = %+v / %+v, want gpu +1 for all pods", plan.ScaleUps, plan.NoScaleUp)
				}
				return
			}
			if len(plan.ScaleUps) != 0 {
				t.Fatalf("scale-ups = %+v, want none", plan.ScaleUps)
			}
			if len(plan.NoScaleUp) != 3 {
				t.Fatalf("noScaleUp = %+v, want all 3 pods", plan.NoScaleUp)
			}
			for _, n := range plan.NoScaleUp {
				if n.Code != tc.wantCode || !strings.Contains(n.Reason, tc.wantText) {
					t.Errorf("%s: %s %q, want %s containing %q", n.Pod, n.Code, n.Reason, tc.wantCode, tc.wantText)
				}
			}
		})
	}
}

// Live nodes named like new ones (<group>-new-<n>) are skipped.
func TestNewNodeNamesNeverClash(t *testing.T) {
	snap := snapshot.New()
	for _, name := range []string{"gpu-new-0", "gpu-new-2"} {
		if err := snap.AddNode(fx.Node(name, 1, 1, nil)); err != nil { // too small to take a pod
			t.Fatal(err)
		}
	}
	p := newPlanner(t, snap, draGroup("gpu", 8, 10))
	plan, err := p.Plan(replicas("train", 24, 100, fx.GPUs(fx.GPUResource, 1)))
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]int{}
	for _, su := range plan.ScaleUps {
		for _, pl := range su.Placements {
			nodes[pl.Node]++
		}
	}
	want := map[string]int{"gpu-new-1": 8, "gpu-new-3": 8, "gpu-new-4": 8}
	if len(nodes) != len(want) {
		t.Fatalf("new nodes %v, want %v", nodes, want)
	}
	for n, c := range want {
		if nodes[n] != c {
			t.Errorf("new nodes %v, want %v", nodes, want)
		}
	}
}

func TestNewNodeName(t *testing.T) {
	tests := []struct {
		k     int
		taken []int
		want  string
	}{
		{0, nil, "g-new-0"},
		{5, nil, "g-new-5"},
		{0, []int{0, 1}, "g-new-2"},
		{1, []int{0, 1}, "g-new-3"},
		{2, []int{3}, "g-new-2"},
		{3, []int{3}, "g-new-4"},
	}
	for _, tc := range tests {
		if got := newNodeName("g", tc.k, tc.taken); got != tc.want {
			t.Errorf("newNodeName(g, %d, %v) = %s, want %s", tc.k, tc.taken, got, tc.want)
		}
	}
	if got := takenIndexes([]string{"g-new-3", "g-new-03", "g-new-x", "g-new-1", "h-new-0", "g-new-3"}, "g"); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("takenIndexes = %v, want [1 3]", got)
	}
}

// A group's own live node named like a new one (gpu-new-0) holds its
// index once: the first new node is gpu-new-1, not gpu-new-2.
func TestNewNodeNameAfterOwnNamedMember(t *testing.T) {
	snap := snapshot.New()
	member := fx.Node("gpu-new-0", 1, 1, nil) // too small to take a pod
	member.Labels[nodegroup.GroupLabel] = "gpu"
	if err := snap.AddNode(member); err != nil {
		t.Fatal(err)
	}
	p := newPlanner(t, snap, draGroup("gpu", 8, 10))
	plan, err := p.Plan(replicas("train", 8, 100, fx.GPUs(fx.GPUResource, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 1 || plan.ScaleUps[0].Placements[0].Node != "gpu-new-1" {
		t.Fatalf("scale-ups %+v, want one new node gpu-new-1", plan.ScaleUps)
	}
}
