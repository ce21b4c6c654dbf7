package scaleup

import (
	"context"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/gang"
)

// gangPods are a gang's pending pods that the planner plans together.
type gangPods struct {
	gang *gang.Gang
	pods []*v1.Pod
}

// splitGangs takes the pods of gangs out of pending. A pod the scheduler
// will not try (its PodGroup missing, fewer pods than minCount) gets its
// reason; a gang whose quorum is already met binds pod by pod, so its
// pods stay with the others. Gangs come in the order of their first pod in pending.
func (p *Planner) splitGangs(pending []*v1.Pod, plan *Plan) ([]*v1.Pod, []gangPods) {
	if p.Gangs == nil {
		return pending, nil
	}
	singles := make([]*v1.Pod, 0, len(pending))
	byGang := map[*gang.Gang]int{}
	var gangs []gangPods
	for _, pod := range pending {
		g, problem := p.Gangs.Of(pod)
		switch {
		case problem != nil:
			plan.NoScaleUp = append(plan.NoScaleUp, NoScaleUp{Pod: RefOf(pod), Code: ReasonCode(problem.Code), Reason: problem.Message})
		case g == nil:
			singles = append(singles, pod)
		case g.Need() == 0:
			// Past its quorum a topology gang's pods still go only to its
			// running pods' domain.
			singles = append(singles, p.inRunningDomain(g, pod))
		default:
			i, ok := byGang[g]
			if !ok {
				i = len(gangs)
				byGang[g] = i
				gangs = append(gangs, gangPods{gang: g})
			}
			gangs[i].pods = append(gangs[i].pods, pod)
		}
	}
	return singles, gangs
}

// planGang plans a gang all or nothing, as the scheduler binds it: the
// pods still needed for its quorum (minCount less those running) go to
// existing nodes where they fit and the rest to new nodes of one group
// (balanced with similar groups) in one atomic step. When that cannot be
// done nothing is planned, not even on existing nodes, and every pending
// pod of the gang gets one reason naming the gang, its minCount and what
// was short. A gang with a topology key is planned in one domain
// (planTopologyGang). It returns the gang's pods left over once its
// quorum is planned: they bind one by one, as other pods.
func (p *Planner) planGang(ctx context.Context, st *state, gp gangPods, plan *Plan) ([]*v1.Pod, error) {
	if gp.gang.TopologyKey != "" {
		return p.planTopologyGang(ctx, st, gp, plan)
	}
	out, err := p.tryGang(ctx, st, gp)
	if err != nil {
		return nil, err
	}
	out.applyTo(plan, gp, nil)
	return out.rest, nil
}

// gangOutcome is one attempt at a gang: where its pods go, or why they
// cannot all go anywhere.
type gangOutcome struct {
	existing []Placement
	// onExisting counts the pods existing nodes take.
	onExisting int
	// scaleUps are the atomic steps for the pods no existing node takes;
	// nil when existing nodes take the quorum.
	scaleUps []ScaleUp
	rest     []*v1.Pod
	// refused is set when nothing is planned: code and why (head names
	// the gang; short is what was short), and each group's reason.
	refused     bool
	code        ReasonCode
	head, short string
	reasons     []GroupReason
	// group is the one group an alike domain's outcome was planned with
	// (alikeDomains), whose name its reason carries.
	group string
}

func (o *gangOutcome) newNodes() (n int) {
	for _, su := range o.scaleUps {
		n += su.NewNodes
	}
	return n
}

// applyTo writes the outcome into the plan; topo names the domain of a
// topology gang's steps (nil for none).
func (o *gangOutcome) applyTo(plan *Plan, gp gangPods, topo *Topology) {
	if o.refused {
		refuseGang(gp, plan, o.code, o.head+o.short, o.reasons)
		return
	}
	plan.ExistingNodes = append(plan.ExistingNodes, o.existing...)
	for i := range o.scaleUps {
		o.scaleUps[i].Atomic = true
		o.scaleUps[i].Gang = gp.gang.String()
		o.scaleUps[i].Topology = topo
	}
	if len(o.scaleUps) > 0 && len(plan.FirstLoop) == 0 {
		plan.FirstLoop = o.scaleUps
	}
	for _, su := range o.scaleUps {
		plan.addScaleUp(su, 0)
	}
}

// tryGang plans the gang's pods on existing nodes and new nodes of the
// planner's groups. Planned, the snapshot holds them; refused, the
// snapshot and the planned counts are as before.
func (p *Planner) tryGang(ctx context.Context, st *state, gp gangPods) (gangOutcome, error) {
	snap := p.Engine.Snapshot()
	need := gp.gang.Need()
	snap.Fork()
	planned := maps.Clone(st.planned)
	trial := &Plan{}
	rest, err := p.placeOnExisting(ctx, SortSchedulerQueue(gp.pods), trial, st.kinds)
	if err != nil {
		snap.Revert()
		return gangOutcome{}, err
	}
	onExisting := len(gp.pods) - len(rest)
	if onExisting >= need {
		snap.Commit()
		return gangOutcome{existing: trial.ExistingNodes, onExisting: onExisting, rest: rest}, nil
	}
	short := need - onExisting
	head := fmt.Sprintf("%s is a gang of minCount %d with %d running: %d more pods must be scheduled together, %d fit existing nodes",
		gp.gang, gp.gang.MinCount, gp.gang.Scheduled, need, onExisting)
	if len(rest) < short {
		snap.Revert()
		return gangOutcome{refused: true, code: GangIncomplete, head: head, onExisting: onExisting,
			short: fmt.Sprintf(", and only %d more are pending and old enough to plan for", len(rest))}, nil
	}
	rest = SortLargestFirst(rest, st.kinds)
	// All the gang's pods if new nodes take them, else only its quorum.
	attempts := [][]*v1.Pod{rest}
	if len(rest) > short {
		attempts = append(attempts, rest[:short])
	}
	var reasons []GroupReason
	for _, pods := range attempts {
		var sus []ScaleUp
		sus, reasons, err = p.allOrNothingStep(ctx, st, pods)
		if err == nil && sus == nil && len(st.groups) > 1 {
			// Pods no one group takes all of (workers on GPU nodes, a
			// launcher pinned to CPU nodes) may fit several groups'
			// nodes together, all asked for at once.
			sus, err = p.acrossGroups(ctx, st, pods, short)
		}
		if err != nil {
			snap.Revert()
			st.planned = planned
			return gangOutcome{}, err
		}
		if sus == nil {
			continue
		}
		snap.Commit()
		return gangOutcome{existing: trial.ExistingNodes, onExisting: onExisting, scaleUps: sus, rest: withoutRefs(rest, sus)}, nil
	}
	snap.Revert()
	st.planned = planned
	_, msg := reasonOf(reasons)
	return gangOutcome{refused: true, code: GangDoesNotFit, head: head, onExisting: onExisting,
		short: "; no scale-up takes them all: " + msg, reasons: reasons}, nil
}

// acrossGroups plans pods on new nodes of several groups, one step after
// another as the expander chooses, and keeps the steps only if at least
// need of the pods are placed; otherwise nothing changes. The steps are
// one scale-up: the gang asks for all their nodes at once.
func (p *Planner) acrossGroups(ctx context.Context, st *state, pods []*v1.Pod, need int) ([]ScaleUp, error) {
	snap := p.Engine.Snapshot()
	snap.Fork()
	planned := maps.Clone(st.planned)
	var sus []ScaleUp
	left, err := p.stepByStep(ctx, st, pods, func(step []ScaleUp) { sus = append(sus, step...) })
	if err != nil {
		snap.Revert()
		st.planned = planned
		return nil, err
	}
	if len(pods)-len(left) < need {
		snap.Revert()
		st.planned = planned
		return nil, nil
	}
	snap.Commit()
	return sus, nil
}

// refuseGang gives every pending pod of the gang the same reason.
func refuseGang(gp gangPods, plan *Plan, code ReasonCode, msg string, reasons []GroupReason) {
	for _, pod := range gp.pods {
		plan.NoScaleUp = append(plan.NoScaleUp, NoScaleUp{Pod: RefOf(pod), Code: code, Reason: msg, NodeGroups: reasons})
	}
}

// withoutRefs drops from pods those the scale-ups place.
func withoutRefs(pods []*v1.Pod, sus []ScaleUp) []*v1.Pod {
	placed := map[PodRef]bool{}
	for _, su := range sus {
		for _, ref := range su.Pods {
			placed[ref] = true
		}
	}
	out := pods[:0:0]
	for _, pod := range pods {
		if !placed[RefOf(pod)] {
			out = append(out, pod)
		}
	}
	return out
}
