package scaleup

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/snapshot"
)

// gangGroup is a PodGroup with a gang policy of minCount pods.
func gangGroup(name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
}

// inGroup puts pods in PodGroup group.
func inGroup(group string, pods []*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	return pods
}

func newNodes(plan *Plan) (n int) {
	for _, su := range plan.ScaleUps {
		n += su.NewNodes
	}
	return n
}

// A gang is planned whole: it gets all the nodes its quorum needs in one
// atomic step, or none, and then every one of its pods says why, naming
// the gang, its minCount and the bound that was short.
func TestGangsAllOrNothing(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	for _, tc := range []struct {
		name        string
		pods        int
		minCount    int32
		maxSize     int
		noGangs     bool // pod by pod, as without GenericWorkload
		wantNodes   int
		wantRefused int
		wantCode    ReasonCode
		wantText    []string
	}{
		{name: "16 pods on 8-GPU nodes", pods: 16, minCount: 16, maxSize: 4, wantNodes: 2},
		{name: "one node over max", pods: 40, minCount: 40, maxSize: 4, wantRefused: 40, wantCode: GangDoesNotFit,
			wantText: []string{"PodGroup default/train is a gang of minCount 40", "40 more pods must be scheduled together",
				"node group gpu-dra: all 40 pods need 5 new nodes; max size 4 leaves room for 4"}},
		{name: "pod by pod adds nodes for part of it", pods: 40, minCount: 40, maxSize: 4, noGangs: true, wantNodes: 4, wantRefused: 8},
		// Past its quorum the gang's pods bind one by one: 12 pods of
		// minCount 8 on one node of room get the node for 8 of them.
		{name: "quorum fits, the rest wait", pods: 12, minCount: 8, maxSize: 1, wantNodes: 1, wantRefused: 4, wantCode: MaxSizeReached},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, tc.maxSize))
			pods := inGroup("train", replicas("train", tc.pods, 500, gpu))
			if !tc.noGangs {
				p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{gangGroup("train", tc.minCount)}}, pods)
			}
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			if n := newNodes(plan); n != tc.wantNodes {
				t.Fatalf("%d new nodes (%+v), want %d", n, plan.ScaleUps, tc.wantNodes)
			}
			if len(plan.NoScaleUp) != tc.wantRefused {
				t.Fatalf("%d pods without a node, want %d: %+v", len(plan.NoScaleUp), tc.wantRefused, plan.NoScaleUp)
			}
			if tc.wantNodes > 0 && !tc.noGangs {
				if len(plan.FirstLoop) != 1 || !plan.FirstLoop[0].Atomic || plan.FirstLoop[0].Gang != "PodGroup default/train" ||
					plan.FirstLoop[0].NewNodes != tc.wantNodes {
					t.Errorf("first loop %+v, want one atomic step of %d nodes for PodGroup default/train", plan.FirstLoop, tc.wantNodes)
				}
			}
			for _, n := range plan.NoScaleUp {
				if tc.wantCode != "" && n.Code != tc.wantCode {
					t.Fatalf("pod %s: code %s, want %s (%s)", n.Pod, n.Code, tc.wantCode, n.Reason)
				}
				for _, want := range tc.wantText {
					if !strings.Contains(n.Reason, want) {
						t.Fatalf("pod %s: reason %q lacks %q", n.Pod, n.Reason, want)
					}
				}
			}
		})
	}
}

// A gang that cannot run takes no room on existing nodes either: the
// scheduler binds none of its pods, so the next gang still gets that room.
func TestRefusedGangLeavesExistingRoom(t *testing.T) {
	snap := snapshot.New()
	if err := snap.AddNode(fx.Node("n0", 64, 256, nil)); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddResourceSlice(fx.GPUSlice("n0", 4)); err != nil {
		t.Fatal(err)
	}
	p := newPlanner(t, snap, draGroup("gpu-dra", 8, 1))
	gpu := fx.GPUs(fx.GPUResource, 1)
	big := inGroup("a-train", replicas("a-train", 16, 500, gpu)) // 4 on n0 + 8 new < 16
	small := inGroup("b-train", replicas("b-train", 4, 500, gpu))
	pods := append(append([]*v1.Pod{}, big...), small...)
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{gangGroup("a-train", 16), gangGroup("b-train", 4)}}, pods)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	onExisting := map[string]bool{}
	for _, pl := range plan.ExistingNodes {
		onExisting[pl.Pod.Name] = true
	}
	for _, pod := range small {
		if !onExisting[pod.Name] {
			t.Errorf("pod %s not on n0; existing placements %+v", pod.Name, plan.ExistingNodes)
		}
	}
	refused := 0
	for _, n := range plan.NoScaleUp {
		refused++
		if n.Code != GangDoesNotFit || !strings.Contains(n.Reason, "4 fit existing nodes") || !strings.Contains(n.Reason, "PodGroup default/a-train") {
			t.Errorf("pod %s: %s %q, want GangDoesNotFit for a-train saying 4 fit existing nodes", n.Pod, n.Code, n.Reason)
		}
	}
	if refused != 16 || newNodes(plan) != 0 {
		t.Errorf("%d gang pods refused and %d new nodes, want 16 and 0", refused, newNodes(plan))
	}
}

// Pods the scheduler does not try get their reason and no node: a missing
// PodGroup, fewer pods than minCount. A gang whose quorum runs already is
// planned pod by pod.
func TestGangPodsTheSchedulerWaitsFor(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	orphan := inGroup("gone", replicas("orphan", 2, 500, gpu))
	short := inGroup("short", replicas("short", 3, 500, gpu))
	running := inGroup("done", replicas("done", 4, 500, gpu))
	for _, pod := range running[:2] {
		pod.Spec.NodeName = "elsewhere"
	}
	all := append(append(append([]*v1.Pod{}, orphan...), short...), running...)
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 4))
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{gangGroup("short", 4), gangGroup("done", 2)}}, all)
	plan, err := p.Plan(append(append(append([]*v1.Pod{}, orphan...), short...), running[2:]...))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]NoScaleUp{}
	for _, n := range plan.NoScaleUp {
		got[n.Pod.Name] = n
	}
	for _, pod := range orphan {
		if n := got[pod.Name]; n.Code != PodGroupNotFound || !strings.Contains(n.Reason, "spec.schedulingGroup.podGroupName names PodGroup default/gone") {
			t.Errorf("%s: %s %q, want PodGroupNotFound naming the field and the group", pod.Name, n.Code, n.Reason)
		}
	}
	for _, pod := range short {
		if n := got[pod.Name]; n.Code != GangIncomplete || !strings.Contains(n.Reason, "spec.schedulingPolicy.gang.minCount is 4 but only 3 pods name it") {
			t.Errorf("%s: %s %q, want GangIncomplete naming minCount", pod.Name, n.Code, n.Reason)
		}
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].Atomic || len(plan.ScaleUps[0].Pods) != 2 {
		t.Fatalf("scale-ups %+v, want one, not atomic, for the 2 pods of the gang whose quorum runs", plan.ScaleUps)
	}
}

// Gangs and single pods together: the gang's step is the first loop's,
// the single pods' nodes come in later loops, and each gang gets nodes of
// its own.
func TestGangsWithSinglePods(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 10))
	var pods []*v1.Pod
	var groups []*schedulingv1beta1.PodGroup
	for i := range 3 {
		name := fmt.Sprintf("g%d", i)
		pods = append(pods, inGroup(name, replicas(name, 8, 500, gpu))...)
		groups = append(groups, gangGroup(name, 8))
	}
	pods = append(pods, replicas("web", 12, 500, gpu)...)
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: groups}, pods)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if n := newNodes(plan); n != 5 || len(plan.NoScaleUp) != 0 {
		t.Fatalf("%d new nodes, %d refused, want 5 and none", n, len(plan.NoScaleUp))
	}
	if len(plan.FirstLoop) != 1 || plan.FirstLoop[0].Gang != "PodGroup default/g0" || plan.FirstLoop[0].NewNodes != 1 {
		t.Errorf("first loop %+v, want gang g0's node", plan.FirstLoop)
	}
}

// A gang whose pods no one group takes all of (GPU workers, a launcher
// that runs on CPU nodes only) gets nodes of both groups, all asked for
// in the first loop, each atomically.
func TestGangAcrossGroups(t *testing.T) {
	cpu := plainGroup("cpu", 16, 4, map[string]string{"pool": "cpu"})
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 4), cpu)
	workers := replicas("worker", 8, 500, fx.GPUs(fx.GPUResource, 1))
	launcher := replicas("launcher", 1, 500, nil)
	launcher[0].Spec.NodeSelector = map[string]string{"pool": "cpu"}
	pods := inGroup("train", append(workers, launcher...))
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{gangGroup("train", 9)}}, pods)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NoScaleUp) != 0 || len(plan.FirstLoop) != 2 {
		t.Fatalf("first loop %+v, refused %+v; want one step per group and none refused", plan.FirstLoop, plan.NoScaleUp)
	}
	for _, su := range plan.FirstLoop {
		if !su.Atomic || su.Gang != "PodGroup default/train" || su.NewNodes != 1 {
			t.Errorf("step %+v, want one atomic node for the gang", su)
		}
	}
}
