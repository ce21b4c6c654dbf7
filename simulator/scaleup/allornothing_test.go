package scaleup

import (
	"strings"
	"testing"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/snapshot"
)

// All or nothing: the pods one group's new nodes take all of are planned
// in one step; a group that takes only part gets nothing, and every pod
// says which bound was short, naming the group.
func TestAllOrNothing(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	for _, tc := range []struct {
		name       string
		pods       int
		maxSize    int
		perScaleUp int
		plain      bool // planned pod by pod instead
		wantNodes  int
		wantCode   ReasonCode
		wantText   []string
	}{
		{name: "fits", pods: 24, maxSize: 4, wantNodes: 3},
		{name: "one node over max", pods: 40, maxSize: 4, wantCode: MaxSizeReached,
			wantText: []string{NotAllPodsFitText, "node group gpu-dra", "all 40 pods need 5 new nodes", "max size 4 leaves room for 4"}},
		{name: "pod by pod takes part of it", pods: 40, maxSize: 4, plain: true, wantNodes: 4},
		{name: "over --max-nodes-per-scaleup", pods: 24, maxSize: 10, perScaleUp: 2, wantCode: MaxNodesPerScaleUpReached,
			wantText: []string{"all 24 pods need 3 new nodes; --max-nodes-per-scaleup is 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, tc.maxSize))
			p.AllOrNothing = !tc.plain
			p.Limits = limits.Options{MaxNodesPerScaleUp: tc.perScaleUp}
			plan, err := p.Plan(replicas("train", tc.pods, 500, gpu))
			if err != nil {
				t.Fatal(err)
			}
			nodes := 0
			for _, su := range plan.FirstLoop {
				nodes += su.NewNodes
			}
			if nodes != tc.wantNodes {
				t.Fatalf("first loop adds %d nodes (%+v), want %d", nodes, plan.FirstLoop, tc.wantNodes)
			}
			if tc.plain {
				if len(plan.NoScaleUp) != tc.pods-8*tc.wantNodes {
					t.Errorf("%d pods without a node, want %d", len(plan.NoScaleUp), tc.pods-8*tc.wantNodes)
				}
				return
			}
			if tc.wantCode == "" {
				if len(plan.NoScaleUp) != 0 || len(plan.ScaleUps) != 1 || len(plan.ScaleUps[0].Pods) != tc.pods {
					t.Fatalf("plan %+v, want every pod on the new nodes", plan)
				}
				return
			}
			if len(plan.ScaleUps) != 0 || len(plan.NoScaleUp) != tc.pods {
				t.Fatalf("%d scale-ups and %d pods without a node, want none and all %d", len(plan.ScaleUps), len(plan.NoScaleUp), tc.pods)
			}
			for _, n := range plan.NoScaleUp {
				if n.Code != tc.wantCode {
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

// One pod that no new node takes sinks the whole request, and says so.
func TestAllOrNothingOnePodNeverFits(t *testing.T) {
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 10))
	p.AllOrNothing = true
	pods := append(replicas("train", 8, 500, fx.GPUs(fx.GPUResource, 1)), replicas("big", 1, 500, fx.GPUs(fx.GPUResource, 9))...)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 0 || len(plan.NoScaleUp) != 9 {
		t.Fatalf("%d scale-ups, %d pods without a node; want none and 9", len(plan.ScaleUps), len(plan.NoScaleUp))
	}
	if r := plan.NoScaleUp[0].Reason; !strings.Contains(r, "node group gpu-dra: 1 of the 9 pods never fit its new nodes") {
		t.Errorf("reason %q, want the pod that never fits named", r)
	}
}

// The expander chooses among the groups that take all the pods: a larger
// group wins over a cheaper one that would take only part.
func TestAllOrNothingSkipsGroupsThatTakePart(t *testing.T) {
	p := newPlanner(t, snapshot.New(), draGroup("a-small", 8, 2), draGroup("b-large", 8, 10))
	p.AllOrNothing = true
	plan, err := p.Plan(replicas("train", 32, 500, fx.GPUs(fx.GPUResource, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.FirstLoop) != 1 || plan.FirstLoop[0].NodeGroup != "b-large" || plan.FirstLoop[0].NewNodes != 4 {
		t.Fatalf("first loop %+v, want b-large +4", plan.FirstLoop)
	}
}
