package scaleup

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// The expander compares the counts the scheduler needs, not the packed
// ones. Two 2-CPU pods and then a 4-CPU pod: on 4-CPU nodes they pack
// onto 2 nodes, but the scheduler spreads the 2-CPU pods over two nodes
// and the 4-CPU pod needs a third; one 10-CPU node holds all three either
// way. Packed, the 4-CPU group wastes less and costs less per pod; as the
// scheduler places the pods, the 10-CPU node does.
func TestExpanderComparesScoredCounts(t *testing.T) {
	pods := func() []*v1.Pod {
		var out []*v1.Pod
		for i, cpu := range []int64{2000, 2000, 4000} {
			pod := fx.Pod(fmt.Sprintf("p%d-%dm", i, cpu), cpu, nil)
			pod.CreationTimestamp = metav1.NewTime(fx.Epoch.Add(time.Duration(i) * time.Second))
			out = append(out, pod)
		}
		return out
	}
	for _, name := range []string{"least-waste", "price"} {
		t.Run(name, func(t *testing.T) {
			small, big := plainGroup("cpu-4", 4, 10, nil), plainGroup("cpu-10", 10, 10, nil)
			small.Spec.Price, big.Spec.Price = nodegroup.PriceOf(1), nodegroup.PriceOf(2.5)
			// Dearer 4-CPU groups: packed, cheaper per pod than cpu-10;
			// scored, dearer than cpu-4 scored, so their searches stop
			// at 2 nodes (price's bound).
			dearer, dearest := plainGroup("cpu-4-b", 4, 10, nil), plainGroup("cpu-4-c", 4, 10, nil)
			dearer.Spec.Price, dearest.Spec.Price = nodegroup.PriceOf(1.05), nodegroup.PriceOf(1.1)
			// More memory, so they are not alike cpu-4 (whose answer
			// they would share).
			for i, g := range []*nodegroup.NodeGroup{dearer, dearest} {
				mem := resource.MustParse(fmt.Sprintf("%dGi", 17+i))
				g.Spec.Template.Status.Capacity[v1.ResourceMemory] = mem
				g.Spec.Template.Status.Allocatable[v1.ResourceMemory] = mem
			}
			p := newPlanner(t, snapshot.New(), small, big, dearer, dearest)
			exp, err := expander.New(name, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			p.Expander = exp
			plan, err := p.Plan(pods())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "cpu-10" || plan.ScaleUps[0].NewNodes != 1 || len(plan.NoScaleUp) != 0 {
				t.Fatalf("plan = %+v (no scale-up %+v), want cpu-10 +1 for the 3 pods (cpu-4 would need 3 nodes)", plan.ScaleUps, plan.NoScaleUp)
			}
			if name == "price" && p.scoredLost != 2 {
				t.Fatalf("%d scored searches stopped by the bound, want 2 (cpu-4-b, cpu-4-c)", p.scoredLost)
			}
		})
	}
}

// TestScoredBoundStopsOnlyLosers: with many instance-type groups and pods
// of five kinds, least-waste and price stop searching the scored count of
// options that cannot beat the best scored one, and the plan is the one
// searching every chosen option in full gives.
func TestScoredBoundStopsOnlyLosers(t *testing.T) {
	for _, name := range []string{"least-waste", "price"} {
		t.Run(name, func(t *testing.T) {
			plan := func(inFull bool) (string, *Planner) {
				same := func(e expander.Strategy) expander.Strategy { return e }
				return planInstanceTypes(t, name, fx.FiveKinds(100), same, func(p *Planner) { p.scoredInFull = inFull })
			}
			bounded, p := plan(false)
			full, pf := plan(true)
			if bounded != full {
				t.Fatalf("the plan changed when scored searches were stopped:\n%s\nin full:\n%s", bounded, full)
			}
			if name == "least-waste" && p.scoredLost == 0 || pf.scoredLost != 0 || pf.scoredSearches < 2 {
				t.Fatalf("scored searches stopped: %d bounded, %d in full (of %d); want some, none", p.scoredLost, pf.scoredLost, pf.scoredSearches)
			}
		})
	}
}
