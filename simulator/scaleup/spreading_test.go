package scaleup

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// Small device pods created before a larger shared claim are spread by
// the scheduler's scoring (least allocated) over the new nodes, so no
// node keeps room for the claim: the plan must count the node that
// takes, as the scheduler will need it. Packed tightly, the small pods
// would share a node and one node fewer would seem enough.
func TestSmallDevicePodsSpreadBeforeSharedClaim(t *testing.T) {
	tests := []struct {
		name       string
		smallFirst bool
		wantNodes  int
	}{
		// Scoring puts eval-0 and eval-1 (2 GPUs each) on two nodes, 2
		// GPUs left on each: the workers' 4-GPU claim needs a third.
		{name: "small pods first", smallFirst: true, wantNodes: 3},
		// The shared claim takes a whole node first; the evaluators
		// share the other.
		{name: "shared claim first", smallFirst: false, wantNodes: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetResourceClaimTemplate(fx.ClaimTemplate("two-gpus", "gpu.example.com", 2))
			snap.SetResourceClaim(fx.Claim("ring", "gpu.example.com", 4))
			p := newPlanner(t, snap, draGroup("gpu", 4, 10))
			var small, workers []*v1.Pod
			for i := 0; i < 2; i++ {
				small = append(small, fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("eval-%d", i), 2000, nil), "gpus", "two-gpus"))
			}
			for i := 0; i < 3; i++ {
				workers = append(workers, fx.WithClaim(fx.Pod(fmt.Sprintf("worker-%d", i), 4000, nil), "gpus", "ring"))
			}
			pods := append(workers, small...)
			if tc.smallFirst {
				pods = append(small, workers...)
			}
			for i, pod := range pods {
				pod.CreationTimestamp = metav1.NewTime(fx.Epoch.Add(time.Duration(i) * time.Second))
			}
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, su := range plan.ScaleUps {
				got += su.NewNodes
			}
			if got != tc.wantNodes || len(plan.NoScaleUp) != 0 {
				t.Fatalf("new nodes %d, pods without scale-up %+v; want %d nodes, none without", got, plan.NoScaleUp, tc.wantNodes)
			}
			// Every worker is placed on the node of the shared claim.
			nodes := map[string]bool{}
			for _, pl := range plan.ScaleUps[0].Placements {
				if pl.Pod.Name[:6] == "worker" {
					nodes[pl.Node] = true
				}
			}
			if len(nodes) != 1 {
				t.Errorf("workers on nodes %v, want one node", nodes)
			}
		})
	}
}
