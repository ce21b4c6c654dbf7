package scaleup

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// unbounded is an expander under another name: the planner does not
// know its choice, so it estimates every group in full.
type unbounded struct{ expander.Strategy }

func (unbounded) Name() string { return "unbounded" }

// FewerNodesBetter is the wrapped expander's: scored options are compared
// as without the wrapper.
func (u unbounded) FewerNodesBetter() bool { return expander.FewerNodesBetter(u.Strategy) }

// TestBoundsGiveUpOnlyOnLosers: with many instance-type groups,
// least-waste and price stop estimating the groups that cannot beat the
// best so far, and the plan is the one every group estimated in full
// gives.
func TestBoundsGiveUpOnlyOnLosers(t *testing.T) {
	for _, name := range []string{"least-waste", "price"} {
		t.Run(name, func(t *testing.T) { boundsGiveUpOnlyOnLosers(t, name) })
	}
}

func boundsGiveUpOnlyOnLosers(t *testing.T, name string) {
	pods := fx.FiveKinds(60)
	bounded, p := planInstanceTypes(t, name, pods, func(e expander.Strategy) expander.Strategy { return e }, nil)
	full, pf := planInstanceTypes(t, name, pods, func(e expander.Strategy) expander.Strategy { return unbounded{e} }, nil)
	if bounded != full {
		t.Fatalf("the plan changed when groups were given up on:\n%s\nin full:\n%s", bounded, full)
	}
	if p.abandoned == 0 || pf.abandoned != 0 {
		t.Fatalf("estimates given up on: %d bounded, %d in full; want some, none", p.abandoned, pf.abandoned)
	}
}

// planInstanceTypes plans pods over 60 instance-type groups priced as
// Karpenter's fake types are, with the named expander (wrapped by exp)
// and the planner set by configure; it returns the plan as JSON.
func planInstanceTypes(t *testing.T, name string, pods []*v1.Pod, exp func(expander.Strategy) expander.Strategy, configure func(*Planner)) (string, *Planner) {
	t.Helper()
	groups := instanceTypeGroups(false)[:60]
	for _, g := range groups {
		alloc := g.Spec.Template.Status.Allocatable // Karpenter's fake price
		g.Spec.Price = nodegroup.PriceOf(0.1*float64(alloc.Cpu().Value()) + 0.1*float64(alloc.Memory().Value())/1e9)
	}
	p := newPlanner(t, snapshot.New(), groups...)
	strategy, err := expander.New(name, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Expander = exp(strategy)
	if configure != nil {
		configure(p)
	}
	got, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NoScaleUp) > 0 {
		t.Fatalf("%d pods get no node", len(got.NoScaleUp))
	}
	b, _ := json.Marshal(got)
	return string(b), p
}

// TestWasteBoundOnlyForLeastWaste: most-pods takes the big group that
// holds every pod, though it wastes more than the small one, which is
// at its max size: a bound on waste must not hide it.
func TestWasteBoundOnlyForLeastWaste(t *testing.T) {
	groups := func() []*nodegroup.NodeGroup {
		gs := instanceTypeGroups(false)
		small, big := gs[1], gs[99] // 2 and 100 vCPUs
		small.Spec.MaxSize = 2
		return []*nodegroup.NodeGroup{small, big}
	}
	pods := replicas("web", 20, 500, nil)
	for _, tc := range []struct{ expander, want string }{{"least-waste", "fake-it-1"}, {"most-pods", "fake-it-99"}} {
		p := newPlanner(t, snapshot.New(), groups()...)
		exp, err := expander.New(tc.expander, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		p.Expander = exp
		plan, err := p.Plan(pods)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.ScaleUps) == 0 || plan.ScaleUps[0].NodeGroup != tc.want {
			t.Fatalf("%s: first scale-up %+v, want %s", tc.expander, plan.ScaleUps, tc.want)
		}
	}
}
