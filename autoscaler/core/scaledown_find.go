// Scale-down decisions: which managed nodes may go, since when, and why
// the others stay (the verdicts draxr simulate --scale-down prints),
// with nothing changed in the cluster.

package core

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaledown"
)

// findScaleDown finds nodes whose pods may and can move elsewhere,
// remembers since when, and says of every managed node what scale-down
// makes of it: removable now (unneeded or unready for long enough, never
// below a group's min), unneeded but waiting, or kept and why. It changes
// nothing in the cluster.
func (l *loop) findScaleDown(ctx context.Context) (*scaleDownFindings, error) {
	start := l.cfg.Now()
	findStart := time.Now()
	sim, err := l.SharedSimulation(ctx)
	if err != nil {
		metrics.RegisterError(metrics.ErrorInternal)
		return nil, err
	}
	sim.Snapshot().Fork()
	defer sim.Snapshot().Revert()
	l.placePendingPods(sim, l.st)
	l.buffers.HoldRoom(ctx, l, sim)
	return l.findRemovable(ctx, l.st, sim, start, findStart)
}

// findRemovable is findScaleDown's search on h, the loop's simulation
// with the pending pods and buffers' room in it; start is the loop's
// clock, findStart the wall clock the search's timeout runs from.
func (a *Autoscaler) findRemovable(ctx context.Context, st *clusterstate.State, sim *placement.Engine, start, findStart time.Time) (*scaleDownFindings, error) {
	pdbs, err := a.pdbs()
	if err != nil {
		return nil, err
	}
	checker := drainability.NewChecker(a.cfg.ScaleDown.Drainability, pdbs, start)
	opts := a.groupOptions(ctx)
	size, groupRoom := a.groupSizes(st)
	removals, rejections := scaledown.Find(sim, a.findOptions(st, opts, checker, groupRoom, findStart))
	metrics.UpdateDurationFromStart(metrics.FunctionFindUnneeded, findStart)
	rejections = append(rejections, bindingRejections(st, a.sd.isDeleting)...)

	now := a.cfg.Now()
	f := &scaleDownFindings{now: now, opts: opts, unneededSet: map[string]bool{}}
	a.judgeUnneeded(ctx, st, f, removals, size)
	unready, unreadyRejections, err := a.unreadyDue(st, checker, opts, now)
	if err != nil {
		return nil, err
	}
	rejections = append(rejections, unreadyRejections...)
	a.judgeUnready(st, f, unready, size)
	for node := range a.unneededSince {
		if !f.unneededSet[node] {
			delete(a.unneededSince, node)
		}
	}
	a.reportUnremovable(rejections)
	for _, r := range rejections {
		f.addVerdict(st, r.Node, scaledown.Kept, r.Code, r.Reason)
	}
	f.verdicts = append(f.verdicts, a.otherVerdicts(st, f.verdicts)...)
	sort.Slice(f.verdicts, func(i, j int) bool { return f.verdicts[i].Node < f.verdicts[j].Node })
	return f, nil
}

// groupSizes are each group's Ready nodes not being removed already, and
// how many of them may go before the group is at its min size (counting
// the nodes it has coming).
func (a *Autoscaler) groupSizes(st *clusterstate.State) (size, groupRoom map[string]int) {
	size = map[string]int{}
	for node, g := range st.GroupOf {
		if st.Ready[node] && !a.sd.isDeleting(node) {
			size[g]++
		}
	}
	groupRoom = map[string]int{}
	for g, n := range size {
		if ng := a.group(g); ng != nil {
			groupRoom[g] = n + st.Upcoming[g] - ng.MinSize()
		}
	}
	return size, groupRoom
}

// findOptions are the candidate search's options: which nodes may go and
// which may take their pods, with each group's thresholds.
func (a *Autoscaler) findOptions(st *clusterstate.State, opts func(group string) cloudprovider.NodeGroupOptions,
	checker *drainability.Checker, groupRoom map[string]int, findStart time.Time) scaledown.Options {
	return scaledown.Options{
		UtilizationThreshold: a.cfg.ScaleDown.UtilizationThreshold,
		// Each group's own threshold; the GPU one for nodes with devices.
		ThresholdFor: func(n *v1.Node, devices bool) float64 {
			o := opts(st.GroupOf[n.Name])
			if devices {
				return o.ScaleDownGpuUtilizationThreshold
			}
			return o.ScaleDownUtilizationThreshold
		},
		MayRemove: func(n *v1.Node) bool {
			return st.Ready[n.Name] && st.GroupOf[n.Name] != "" && !a.sd.isDeleting(n.Name) && len(st.Binding[n.Name]) == 0
		},
		MayReceive:   func(n *v1.Node) bool { return st.Ready[n.Name] && !a.sd.isDeleting(n.Name) },
		Drainability: checker,
		Limits:       a.cfg.Limits.Limits,
		Uncounted:    func(n *v1.Node) bool { return a.sd.isDeleting(n.Name) },
		GroupRoom:    groupRoom,
		GroupOf:      func(node string) string { return st.GroupOf[node] },

		ExpendablePodsPriorityCutoff: a.expendableCutoff(),
		Ignore:                       a.cfg.ScaleDown.UtilizationIgnores,
		Stop:                         a.earlyStop(findStart),
		Gangs:                        st.Gangs,
	}
}

// judgeUnneeded gives each node the search found unneeded its verdict:
// kept at a group's min size, removable once unneeded for long enough
// (since when is remembered across loops), or waiting until then. size
// counts down as nodes are let go.
func (a *Autoscaler) judgeUnneeded(ctx context.Context, st *clusterstate.State, f *scaleDownFindings, removals []scaledown.Removal, size map[string]int) {
	now := f.now
	for _, r := range removals {
		g := st.GroupOf[r.Node]
		ng := a.group(g)
		if ng == nil {
			f.addVerdict(st, r.Node, scaledown.Kept, scaledown.NotAutoscaled, fmt.Sprintf("node group %s is no longer one of the provider's", g))
			continue
		}
		if min := ng.MinSize(); size[g]+st.Upcoming[g] <= min {
			f.addVerdict(st, r.Node, scaledown.Kept, scaledown.NodeGroupMinSizeReached,
				fmt.Sprintf("unneeded (utilization %.2f), but node group %s is at its min size %d", r.Utilization, g, min))
			continue
		}
		size[g]--
		f.unneededSet[r.Node] = true
		f.unneeded = append(f.unneeded, r.Node)
		since, ok := a.unneededSince[r.Node]
		if !ok {
			a.unneededSince[r.Node] = now
			since = now
		}
		wait := f.opts(g).ScaleDownUnneededTime
		isDue := now.Sub(since) >= wait
		if isDue {
			f.due = append(f.due, dueNode{name: r.Node, drain: len(r.Moves) > 0})
			f.addVerdict(st, r.Node, scaledown.Removable, "", fmt.Sprintf("unneeded (utilization %.2f) for %v, at least --scale-down-unneeded-time %v; %d pods would move",
				r.Utilization, now.Sub(since).Round(time.Second), wait, len(r.Moves)))
		} else {
			f.addVerdict(st, r.Node, scaledown.Unneeded, scaledown.NotUnneededLongEnough, fmt.Sprintf("unneeded (utilization %.2f) for %v; removed once unneeded for --scale-down-unneeded-time %v",
				r.Utilization, now.Sub(since).Round(time.Second), wait))
		}
		klog.FromContext(ctx).V(4).Info("Node unneeded", "node", r.Node, "since", since, "due", isDue, "moves", len(r.Moves))
	}
}

// judgeUnready gives each node unready for long enough its verdict:
// removable, or kept at a group's min size.
func (a *Autoscaler) judgeUnready(st *clusterstate.State, f *scaleDownFindings, unready []string, size map[string]int) {
	for _, name := range unready {
		g := st.GroupOf[name]
		ng := a.group(g)
		if ng == nil {
			f.addVerdict(st, name, scaledown.Kept, scaledown.NotAutoscaled, fmt.Sprintf("node group %s is no longer one of the provider's", g))
			continue
		}
		if min := ng.MinSize(); size[g]+st.Upcoming[g] <= min {
			f.addVerdict(st, name, scaledown.Kept, scaledown.NodeGroupMinSizeReached, fmt.Sprintf("unready, but node group %s is at its min size %d", g, min))
			continue
		}
		size[g]--
		f.due = append(f.due, dueNode{name: name, drain: true, unready: true})
		f.addVerdict(st, name, scaledown.Removable, "", fmt.Sprintf("unready for at least --scale-down-unready-time %v", f.opts(g).ScaleDownUnreadyTime))
	}
}

// addVerdict records what scale-down makes of node.
func (f *scaleDownFindings) addVerdict(st *clusterstate.State, node string, v scaledown.Verdict, code scaledown.Code, reason string) {
	f.verdicts = append(f.verdicts, scaledown.NodeVerdict{Node: node, NodeGroup: st.GroupOf[node], Verdict: v, Code: code, Reason: reason})
}

// bindingRejections keeps the nodes the scheduler is binding pods to: a
// pod not bound yet cannot be evicted, so removing its node now would
// take it down with the node once bound. It is bound within seconds and
// the node is looked at again then.
func bindingRejections(st *clusterstate.State, deleting func(string) bool) []scaledown.Rejection {
	var out []scaledown.Rejection
	for node, pods := range st.Binding {
		if !st.Ready[node] || st.GroupOf[node] == "" || deleting(node) {
			continue
		}
		// pods come in name order (addPods sorts them).
		b := &drainability.Blocked{Reason: drainability.BlockedByPod, Pod: pods[0],
			Message: fmt.Sprintf("the scheduler is binding %d pod(s) to it (%s first): a pod not bound yet cannot be evicted", len(pods), pods[0])}
		out = append(out, scaledown.Rejection{Node: node, Code: scaledown.Code(b.Reason), Reason: b.String(), Blocked: b})
	}
	return out
}

// placePendingPods puts the pending pods that fit a Ready node now on
// it, as CA's filter-out-schedulable does before scale-down: a node that
// has just come up for them is about to run them, not unneeded, however
// long the scheduler takes to bind them.
func (a *Autoscaler) placePendingPods(sim *placement.Engine, st *clusterstate.State) {
	pending := st.Unschedulable
	if len(st.BindingNodeUnknown) > 0 {
		pending = append(slices.Clip(st.Unschedulable), st.BindingNodeUnknown...)
	}
	if len(pending) == 0 {
		return
	}
	var ready []string
	for _, name := range sim.Snapshot().NodeNames() {
		if st.Ready[name] && !a.sd.isDeleting(name) {
			ready = append(ready, name)
		}
	}
	// Nodes only fill up here: a pod that fits nowhere is not tried again,
	// nor pods Filter cannot tell from it (estimator.Unplaceable), so
	// thousands of pods no node can take cost one try.
	kinds := estimator.NewKinds(sim.Snapshot(), pending)
	nowhere := estimator.NewUnplaceable(sim, kinds, pending)
	room := sim.NewCandidates()
	for _, pod := range pending {
		if nowhere.Holds(pod) {
			if sim.VerifiesShortcuts() {
				for _, n := range ready {
					sim.VerifyRejects("unplaceable pods", pod, n)
				}
			}
			continue
		}
		// Plainly full nodes are left out before any plugin runs.
		candidates := room.For(pod, kinds.Of(pod), ready)
		if len(candidates) == 0 {
			nowhere.Add(pod)
			continue
		}
		if _, _, ferr := sim.PlaceOnAnyNode(pod, candidates); ferr != nil {
			nowhere.Add(pod) // it stays pending
		}
	}
}

// earlyStop is CA's bound on one search for removable nodes. A loop
// starts at most MaxScaleDownParallelism removals, so beyond the nodes
// already unneeded, another such number is worth finding, plus as many
// again in case some stop being unneeded. Nodes are removed only after
// the unneeded time, which spans UnneededTime/ScanInterval loops: more
// than that many loops' worth of removals cannot be acted on in time.
func (a *Autoscaler) earlyStop(start time.Time) scaledown.EarlyStop {
	sd := a.cfg.ScaleDown
	n := sd.MaxScaleDownParallelism
	interval := cmp.Or(sd.ScanInterval, 10*time.Second)
	loops := int(max(sd.UnneededTime, interval) / interval)
	limit := min(len(a.unneededSince)+2*n, n*loops+n)
	timeout := cmp.Or(sd.SimulationTimeout, 30*time.Second)
	previously := make(map[string]bool, len(a.unneededSince))
	for node := range a.unneededSince {
		previously[node] = true
	}
	return scaledown.EarlyStop{
		MaxUnneeded: limit,
		Reason: fmt.Sprintf("not simulated this loop: %d nodes found unneeded already, as many as --max-scale-down-parallelism %d lets the next loops remove",
			limit, n),
		Expired:    func() bool { return time.Since(start) > timeout },
		Previously: previously,
	}
}

// dueNode is a node to remove this loop.
type dueNode struct {
	name           string
	drain, unready bool
}

// scaleDownFindings are what findScaleDown found.
type scaleDownFindings struct {
	now         time.Time
	opts        func(group string) cloudprovider.NodeGroupOptions
	due         []dueNode
	unneeded    []string
	unneededSet map[string]bool
	verdicts    []scaledown.NodeVerdict
}

// otherVerdicts covers the managed nodes the candidate search does not
// reach: being deleted, or not Ready (not yet unready for long enough).
func (a *Autoscaler) otherVerdicts(st *clusterstate.State, have []scaledown.NodeVerdict) []scaledown.NodeVerdict {
	seen := make(map[string]bool, len(have))
	for _, v := range have {
		seen[v.Node] = true
	}
	var out []scaledown.NodeVerdict
	for node, g := range st.GroupOf {
		switch {
		case seen[node]:
		case a.sd.isDeleting(node):
			out = append(out, scaledown.NodeVerdict{Node: node, NodeGroup: g, Verdict: scaledown.Kept, Code: scaledown.CurrentlyBeingDeleted,
				Reason: "already being removed"})
		case !st.Ready[node]:
			out = append(out, scaledown.NodeVerdict{Node: node, NodeGroup: g, Verdict: scaledown.Kept, Code: scaledown.NotUnreadyLongEnough,
				Reason: "not Ready (or its devices not published), and not unready for --scale-down-unready-time yet"})
		default:
			// The candidate search leaves out, silently, underutilized
			// nodes of a group with no room left above its min size.
			min := 0
			if ng := a.group(g); ng != nil {
				min = ng.MinSize()
			}
			out = append(out, scaledown.NodeVerdict{Node: node, NodeGroup: g, Verdict: scaledown.Kept, Code: scaledown.NodeGroupMinSizeReached,
				Reason: fmt.Sprintf("underutilized, but node group %s is at its min size %d", g, min)})
		}
	}
	return out
}

// ExplainScaleDown says, for every node of an autoscaled group, what one
// loop's scale-down makes of it, with the loop's own code and nothing
// changed: the planner's answer to "why is this node not removed?".
func (a *Autoscaler) ExplainScaleDown(ctx context.Context) ([]scaledown.NodeVerdict, error) {
	if err := a.cfg.Provider.Refresh(ctx); err != nil {
		return nil, err
	}
	st, err := a.readClusterState(ctx, false)
	if err != nil {
		return nil, err
	}
	// A loop of its own, with no requests or buffers read: nothing is
	// served, nothing written.
	f, err := a.newLoop(st).findScaleDown(ctx)
	if err != nil {
		return nil, err
	}
	return f.verdicts, nil
}

// unreadyDue returns managed nodes unready for their group's scale-down
// unready time (CA removes those whatever their use), and those of them
// the drain rules keep. Nodes that never became Ready are left to the
// start-up timeouts.
func (a *Autoscaler) unreadyDue(st *clusterstate.State, checker *drainability.Checker,
	opts func(group string) cloudprovider.NodeGroupOptions, now time.Time) ([]string, []scaledown.Rejection, error) {
	var due []string
	var kept []scaledown.Rejection
	for name := range st.GroupOf {
		if st.Ready[name] || a.sd.isDeleting(name) {
			continue
		}
		node, err := a.cfg.View.Nodes.Get(name)
		if err != nil {
			continue
		}
		since, ok := unreadySince(node)
		if !ok || now.Sub(since) < opts(st.GroupOf[name]).ScaleDownUnreadyTime {
			continue
		}
		pods, err := a.podsOn(name)
		if err != nil {
			return nil, nil, err
		}
		if d := checker.Node(node, pods); d.Blocked != nil {
			kept = append(kept, scaledown.Rejection{Node: name, Code: scaledown.Code(d.Blocked.Reason), Reason: d.Blocked.String(), Blocked: d.Blocked})
			continue
		}
		due = append(due, name)
	}
	sort.Strings(due)
	return due, kept, nil
}

// unreadySince is when a node that had been running became unready; a
// node whose readiness last changed within two minutes of its creation is
// still starting (as CA tells them apart).
func unreadySince(n *v1.Node) (time.Time, bool) {
	for _, c := range n.Status.Conditions {
		if c.Type != v1.NodeReady {
			continue
		}
		if c.Status == v1.ConditionTrue || c.LastTransitionTime.Sub(n.CreationTimestamp.Time) < nodeStartingGraceTime {
			return time.Time{}, false
		}
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}

// reportUnremovable keeps the kept candidates for the status ConfigMap
// and emits NoScaleDown on a node when its reason changes.
func (a *Autoscaler) reportUnremovable(rejections []scaledown.Rejection) {
	var kept []scaledown.Rejection
	current := map[string]bool{}
	for _, r := range rejections {
		if r.Code == scaledown.NotUnderutilized || r.Code == scaledown.NotEvaluated {
			continue
		}
		kept = append(kept, r)
		current[r.Node] = true
		if a.sd.noScaleDown[r.Node] == r.Reason {
			continue
		}
		a.sd.noScaleDown[r.Node] = r.Reason
		if node, err := a.cfg.View.Nodes.Get(r.Node); err == nil {
			a.cfg.Recorder.Eventf(node, v1.EventTypeNormal, EventNoScaleDown, "node cannot be removed: %s", r.Reason)
		}
	}
	for node := range a.sd.noScaleDown {
		if !current[node] {
			delete(a.sd.noScaleDown, node)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Node < kept[j].Node })
	byReason := map[string]int{}
	for _, r := range kept {
		byReason[string(r.Code)]++
	}
	metrics.UpdateUnremovableNodesCount(byReason)
	a.sd.mu.Lock()
	a.sd.unremovable = kept
	a.sd.mu.Unlock()
}
