package scaleup

import (
	"context"
	"fmt"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/nodegroup"
)

// NotAllPodsFitText is CA's reason for pods of an all-or-nothing scale-up
// that was given up.
const NotAllPodsFitText = "not all pods would fit and scale-up is using all-or-nothing strategy"

// planAllOrNothing plans remaining (the pods no existing node takes) as
// one scale-up (allOrNothingStep). Otherwise nothing is planned and each
// pod gets, per group, what was short.
func (p *Planner) planAllOrNothing(ctx context.Context, st *state, remaining []*v1.Pod, plan *Plan) error {
	if len(remaining) == 0 {
		return nil
	}
	sus, reasons, err := p.allOrNothingStep(ctx, st, remaining)
	if err != nil {
		return err
	}
	if sus != nil {
		plan.FirstLoop = sus
		for _, su := range sus {
			plan.addScaleUp(su, 0)
		}
		return nil
	}
	code, msg := reasonOf(reasons)
	if len(reasons) > 0 {
		msg = NotAllPodsFitText + ": " + msg
	}
	for _, pod := range remaining {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := NoScaleUp{Pod: RefOf(pod), Code: code, Reason: msg, NodeGroups: reasons}
		if len(reasons) == 0 {
			n = st.explain(pod)
		}
		plan.NoScaleUp = append(plan.NoScaleUp, n)
	}
	return nil
}

// allOrNothingStep plans pods on new nodes in one step: the expander
// chooses among the groups whose new nodes take every one of them, and
// the chosen step (balanced across similar groups) must place them all;
// its nodes and placements are then in the snapshot. Otherwise nothing
// changes and reasons says, per group, what was short: its max size, a
// cluster-wide limit, the per-scale-up cap, or a pod its nodes never
// take.
func (p *Planner) allOrNothingStep(ctx context.Context, st *state, pods []*v1.Pod) ([]ScaleUp, []GroupReason, error) {
	best, ok, err := p.bestOptionFor(ctx, st, pods, len(pods))
	if err != nil {
		return nil, nil, err
	}
	if ok {
		snap := p.Engine.Snapshot()
		snap.Fork()
		planned := maps.Clone(st.planned)
		step, err := st.scaleUpStep(ctx, best, pods)
		if err != nil {
			snap.Revert()
			return nil, nil, err
		}
		var sus []ScaleUp
		placed := 0
		for _, res := range step {
			sus = append(sus, scaleUpOf(p.Engine, res))
			placed += len(res.Placed)
		}
		if placed == len(pods) {
			snap.Commit()
			return sus, nil, nil
		}
		// The balanced step fell short of the estimate: give it all up.
		snap.Revert()
		st.planned = planned
	}
	reasons := make([]GroupReason, 0, len(st.groups))
	for _, g := range st.groups {
		r, err := st.allOrNothingReason(ctx, g, pods)
		if err != nil {
			return nil, nil, err
		}
		reasons = append(reasons, r)
	}
	return nil, reasons, nil
}

// allOrNothingReason says why group g's new nodes do not take all of
// pods: how many nodes all of them need, and which bound leaves fewer.
func (st *state) allOrNothingReason(ctx context.Context, g *nodegroup.NodeGroup, pods []*v1.Pod) (GroupReason, error) {
	reason := func(code ReasonCode, format string, args ...any) GroupReason {
		return GroupReason{NodeGroup: g.Name, Code: code, Message: "node group " + g.Name + ": " + fmt.Sprintf(format, args...)}
	}
	// How many nodes all the pods need, whatever the bounds.
	snap := st.p.Engine.Snapshot()
	snap.Fork()
	res, err := st.binPacking(g.Name, false).EstimateContext(ctx, g, pods, len(pods))
	snap.Revert()
	if err != nil {
		return GroupReason{}, err
	}
	if len(res.Placed) < len(pods) && len(res.Unplaced) > 0 {
		// The first pod that never fits says why for all.
		u := res.Unplaced[0]
		if u.Err != nil {
			st.rejects[g.Name][st.kinds.Of(u.Pod)] = u.Err
		}
		r := st.groupReason(g, u.Pod, st.kinds.Of(u.Pod))
		prefix := "node group " + g.Name + ": "
		r.Message = prefix + fmt.Sprintf("%d of the %d pods never fit its new nodes: %s", len(pods)-len(res.Placed), len(pods),
			strings.TrimPrefix(r.Message, prefix))
		return r, nil
	}
	need := len(res.NewNodes)
	current := st.current[g.Name] + st.planned[g.Name]
	if room := g.Spec.MaxSize - current; room < need {
		return reason(MaxSizeReached, "all %d pods need %d new nodes; max size %d leaves room for %d (%d nodes now)",
			len(pods), need, g.Spec.MaxSize, max(room, 0), current), nil
	}
	if m := st.p.MaxNodesTotal; m > 0 {
		if total := snap.NodeCount(); m-total < need {
			return reason(MaxNodesTotalReached, "all %d pods need %d new nodes; --max-nodes-total %d leaves room for %d (%d nodes in the cluster)",
				len(pods), need, m, max(m-total, 0), total), nil
		}
	}
	if room := st.room(g); room < need {
		why := st.limitReached(g)
		if why == "" {
			why = fmt.Sprintf("the cluster-wide limits leave room for %d", room)
		}
		return reason(ResourceLimitReached, "all %d pods need %d new nodes; %s", len(pods), need, why), nil
	}
	if c := st.p.Limits.MaxNodesPerScaleUp; c > 0 && c < need {
		return reason(MaxNodesPerScaleUpReached, "all %d pods need %d new nodes; --max-nodes-per-scaleup is %d", len(pods), need, c), nil
	}
	return reason(NotChosen, "all %d pods fit %d new nodes, but the expander chose another group", len(pods), need), nil
}
