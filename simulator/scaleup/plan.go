// Package scaleup plans what successive autoscaler loops would do for a
// set of pending pods: place what fits on existing nodes, then repeatedly
// pick the node group (by expander) whose new nodes help the most pods,
// until no pending pod can be helped. The live autoscaler executes the
// first step of the same plan; the offline CLI prints all of it.
package scaleup

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
)

// Plan is the outcome for every pending pod.
type Plan struct {
	ScaleUps      []ScaleUp    `json:"scaleUp"`
	ExistingNodes []Placement  `json:"existingNodes"`
	NoScaleUp     []NoScaleUp  `json:"noScaleUp"`
	Groups        []GroupState `json:"nodeGroups"`
	// FirstLoop is what one autoscaler loop does now: the chosen group's
	// scale-up, and with --balance-similar-node-groups those of the
	// similar groups it is split across. ScaleUps sums every loop per
	// group; the live loop executes FirstLoop.
	FirstLoop []ScaleUp `json:"-"`
}

// ScaleUp is one node group growing, and the pods its new nodes take.
type ScaleUp struct {
	NodeGroup string   `json:"nodeGroup"`
	NewNodes  int      `json:"newNodes"`
	Pods      []PodRef `json:"pods"`
	// Placements lists each pod's new node, for reports.
	Placements []Placement `json:"placements,omitempty"`
	// Atomic: the nodes are asked for all or none (the provider's
	// AtomicIncreaseSize), as for Gang, the gang they are for.
	Atomic bool   `json:"atomic,omitempty"`
	Gang   string `json:"gang,omitempty"`
	// Topology is the one domain the gang's or request's new nodes are
	// in (its topology key and the value chosen); nil for none.
	Topology *Topology `json:"topology,omitempty"`
}

// Topology is a topology domain: a node label key and one of its values.
type Topology struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// String is "key=value", as node selectors are written.
func (t Topology) String() string { return t.Key + "=" + t.Value }

// Placement is a pod and the node it goes to.
type Placement struct {
	Pod     PodRef   `json:"pod"`
	Node    string   `json:"node"`
	Devices []string `json:"devices,omitempty"`
	// DeviceClasses are the DeviceClass of each of Devices ("" when the
	// claim's request names none), for the autoscaler's per-class counts.
	DeviceClasses []string `json:"-"`
}

// NoScaleUp is a pending pod nothing can take, and why: a stable code, a
// message for people, and each node group's own reason.
type NoScaleUp struct {
	Pod        PodRef        `json:"pod"`
	Code       ReasonCode    `json:"code"`
	Reason     string        `json:"reason"`
	NodeGroups []GroupReason `json:"nodeGroups,omitempty"`
}

// GroupState describes a node group as planned.
type GroupState struct {
	Name         string         `json:"name"`
	MinSize      int            `json:"minSize"`
	MaxSize      int            `json:"maxSize"`
	CurrentNodes int            `json:"currentNodes"`
	NewNodes     int            `json:"newNodes"`
	Template     []dynres.Entry `json:"templateResources"`
}

// Planner plans scale-ups over a placement engine's snapshot, which it mutates: run
// it on a fork to keep the snapshot.
type Planner struct {
	Engine   *placement.Engine
	Groups   []*nodegroup.NodeGroup
	Expander expander.Strategy
	// MaxNodesTotal caps all nodes in the cluster; 0 means no cap.
	MaxNodesTotal int
	Matcher       *dynres.Matcher
	// DaemonSets run pods on the new nodes they match.
	DaemonSets []*appsv1.DaemonSet
	// SchedulerNames are the schedulers whose pods are planned for; empty
	// means the placement engine's profile only.
	SchedulerNames []string
	// Limits are CA's cluster-wide resource limits, --max-nodes-per-scaleup
	// and balancing of similar groups; the zero value limits nothing.
	Limits limits.Options
	// BypassedSchedulerNames are planned for too, though no profile serves
	// them (CA's --bypassed-scheduler-names).
	BypassedSchedulerNames []string
	// ExpendablePodsPriorityCutoff: pods whose priority is below it get no
	// scale-up (CA's --expendable-pods-priority-cutoff); nil: none.
	ExpendablePodsPriorityCutoff *int32
	// AllOrNothing plans the pods as one: what does not fit existing nodes
	// is placed on new nodes of one group (and the similar groups it is
	// balanced with) in a single step, or no node is planned at all and
	// every such pod says, per group, what was short (CA's allOrNothing
	// scale-up, used for best-effort-atomic ProvisioningRequests and
	// gangs).
	AllOrNothing bool
	// FirstFit places pods on existing nodes on the first node that fits,
	// searching from the node the last pod went to, instead of scoring
	// every feasible node as the scheduler does: CA's TrySchedulePods,
	// which answers "is there room?" (check-capacity, booking) without
	// predicting which node the scheduler will pick, at a fraction of the
	// cost on large fleets. Feasibility is the same.
	FirstFit bool
	// FirstFitFor places the pods it names first-fit too (in-memory pods
	// such as a CapacityBuffer's, whose node does not matter), the others
	// as the scheduler would.
	FirstFitFor func(*v1.Pod) bool
	// noFillCopies turns off copying first fit's placements onto
	// identical empty nodes (fillRuns): tests compare with the slow path.
	noFillCopies bool
	// Gangs finds the pods scheduled as gangs (PodGroups with a gang
	// policy, GenericWorkload; Volcano's): each gang is planned all or
	// nothing. Nil plans every pod on its own.
	Gangs *gang.Index

	// noAlikeDomains plans a topology gang in every domain in full: tests
	// compare with the alike-domains shortcut.
	noAlikeDomains bool
	// domainNodes are the existing nodes of the topology domain a gang is
	// tried in (inDomain set): placeOnExisting looks at no other.
	domainNodes []string
	inDomain    bool
	// estimates counts the group estimates made, for tests of what
	// shortcuts spare.
	estimates int
	// abandoned counts the estimates given up on (wasteBound), likewise.
	abandoned int

	// exhaustiveScored makes the scored check schedule every pod against
	// every new node (estimator.BinPacking.Scored), for tests that hold
	// the faster Spread to its answers.
	exhaustiveScored bool
	// scoredInFull makes the expander's scored options searched without
	// the bound that stops an option once it cannot be chosen (loseAt),
	// for tests that hold the bound to the full answer.
	scoredInFull bool
	// scoredSearches counts the scored options searched up to their
	// count, and scoredLost those stopped by the bound.
	scoredSearches, scoredLost int
}

// Plan places the pending pods and returns the plan.
func (p *Planner) Plan(pending []*v1.Pod) (*Plan, error) {
	return p.PlanContext(context.Background(), pending)
}

// PlanContext is Plan that stops with ctx's error once ctx ends: checked
// per pod placed or explained and per node group estimated, so that a
// plan of many thousands of pods can be interrupted within a second.
func (p *Planner) PlanContext(ctx context.Context, pending []*v1.Pod) (*Plan, error) {
	if p.Matcher == nil {
		p.Matcher = dynres.NewMatcher()
	}
	groups := append([]*nodegroup.NodeGroup(nil), p.Groups...)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	st := newState(p, groups)
	// A claim a gang's pods share through their PodGroup is one claim.
	pending = p.Engine.GroupClaims(pending)
	// Pods count their own claims by what they ask; all pending pods are
	// given, so that a claim any two of them share keeps its name.
	st.kinds = estimator.NewKinds(p.Engine.Snapshot(), pending)

	plan := &Plan{ScaleUps: []ScaleUp{}, ExistingNodes: []Placement{}, NoScaleUp: []NoScaleUp{}}
	pending = p.setAsideUntried(pending, plan)
	st.kinds.Prepare(pending)
	// Existing nodes take pods in the scheduler's order, so the plan
	// predicts what the scheduler will bind; new nodes are packed largest
	// first, as the Cluster Autoscaler's estimator does.
	singles, gangs := p.splitGangs(SortSchedulerQueue(pending), plan)
	remaining, err := p.placeOnExisting(ctx, singles, plan, st.kinds)
	if err != nil {
		return nil, err
	}
	// Gangs after the pods that bind one by one: each is planned whole, in
	// one step of its own, before any other pod's new nodes.
	for _, gp := range gangs {
		left, err := p.planGang(ctx, st, gp, plan)
		if err != nil {
			return nil, err
		}
		remaining = append(remaining, left...)
	}
	remaining = SortLargestFirst(remaining, st.kinds)
	firstLoopTaken := len(plan.FirstLoop) > 0
	if p.AllOrNothing {
		if err := p.planAllOrNothing(ctx, st, remaining, plan); err != nil {
			return nil, err
		}
		plan.Groups = st.describe()
		return plan, nil
	}
	loop := 0
	remaining, err = p.stepByStep(ctx, st, remaining, func(step []ScaleUp) {
		for _, su := range step {
			if loop == 0 && !firstLoopTaken {
				plan.FirstLoop = append(plan.FirstLoop, su)
			}
			plan.addScaleUp(su, p.Limits.MaxNodesPerScaleUp)
		}
		loop++
	})
	if err != nil {
		return nil, err
	}
	for _, pod := range remaining {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		plan.NoScaleUp = append(plan.NoScaleUp, st.explain(pod))
	}
	plan.Groups = st.describe()
	return plan, nil
}

// stepByStep plans pods on new nodes as successive loops would: each step
// grows the group the expander chooses (and the similar groups it is
// balanced with) for the pods left, until none is left or no group helps.
// Each step's scale-ups go to onStep; it returns the pods left.
func (p *Planner) stepByStep(ctx context.Context, st *state, pods []*v1.Pod, onStep func([]ScaleUp)) ([]*v1.Pod, error) {
	for len(pods) > 0 {
		best, ok, err := p.bestOption(ctx, st, pods)
		if err != nil || !ok {
			return pods, err
		}
		res, err := st.scaleUpStep(ctx, best, pods)
		if err != nil {
			return pods, err
		}
		step := make([]ScaleUp, 0, len(res))
		placed := 0
		for _, r := range res {
			step = append(step, scaleUpOf(p.Engine, r))
			pods = withoutPlaced(pods, r.Placed)
			placed += len(r.Placed)
		}
		onStep(step)
		if placed == 0 {
			return pods, nil
		}
	}
	return pods, nil
}

// setAsideUntried lists the pods the scheduler will not try at all, with
// the reason, and returns the others: a new node would not help them.
func (p *Planner) setAsideUntried(pending []*v1.Pod, plan *Plan) []*v1.Pod {
	served := p.SchedulerNames
	if len(served) == 0 {
		served = []string{p.Engine.SchedulerName()}
	}
	out := make([]*v1.Pod, 0, len(pending))
	for _, pod := range pending {
		switch {
		case IsExpendable(pod, p.ExpendablePodsPriorityCutoff):
			plan.NoScaleUp = append(plan.NoScaleUp, NoScaleUp{Pod: RefOf(pod), Code: Expendable,
				Reason: expendableReason(pod, *p.ExpendablePodsPriorityCutoff)})
		case pod.DeletionTimestamp != nil:
			// A dump taken while a pod is deleted still holds it; the
			// loop's cluster state leaves such pods out.
			plan.NoScaleUp = append(plan.NoScaleUp, NoScaleUp{Pod: RefOf(pod), Code: BeingDeleted,
				Reason: fmt.Sprintf("the pod is being deleted (since %s): the scheduler does not try it", pod.DeletionTimestamp.UTC().Format(time.RFC3339))})
		case len(pod.Spec.SchedulingGates) > 0:
			gates := make([]string, len(pod.Spec.SchedulingGates))
			for i, g := range pod.Spec.SchedulingGates {
				gates[i] = g.Name
			}
			plan.NoScaleUp = append(plan.NoScaleUp, NoScaleUp{Pod: RefOf(pod), Code: SchedulingGated,
				Reason: fmt.Sprintf("scheduling gates %s: the scheduler does not try the pod until they are removed", strings.Join(gates, ", "))})
		case !slices.Contains(served, schedulerOf(pod)) && !slices.Contains(p.BypassedSchedulerNames, schedulerOf(pod)):
			plan.NoScaleUp = append(plan.NoScaleUp, NoScaleUp{Pod: RefOf(pod), Code: NotServedByScheduler,
				Reason: fmt.Sprintf("schedulerName %q is not a profile of the scheduler configuration (%s): that scheduler places the pod, not this one",
					schedulerOf(pod), strings.Join(served, ", "))})
		default:
			out = append(out, pod)
		}
	}
	return out
}

// schedulerOf is the pod's scheduler; the API server defaults an empty
// name to default-scheduler.
func schedulerOf(pod *v1.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return v1.DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// placeOnExisting places pods on existing nodes where kube-scheduler would.
// A pod that fit nowhere is not tried again, nor pods Filter cannot tell
// from it (estimator.Unplaceable): nodes only fill up.
func (p *Planner) placeOnExisting(ctx context.Context, pods []*v1.Pod, plan *Plan, kinds *estimator.Kinds) ([]*v1.Pod, error) {
	nodes := p.Engine.Snapshot().NodeNames()
	if p.inDomain {
		nodes = p.domainNodes
	}
	if len(nodes) == 0 {
		return pods, nil
	}
	var remaining []*v1.Pod
	nowhere := estimator.NewUnplaceable(p.Engine, kinds, pods)
	room := p.Engine.NewCandidates()
	scan := p.Engine.NewNodeScan(nodes)
	last := "" // FirstFit: the node the last pod went to
	// FirstFit: the last placed pod of each kind, whose scheduler pod
	// info its replicas copy.
	lastOfKind := map[string]types.UID{}
	// FirstFit: each kind's "plainly no room" test, made once (it reads
	// the nodes when called).
	noRoomOf := map[string]func(string) bool{}
	runs := newFillRuns(p.Engine, kinds, pods, p.noFillCopies)
	for i := 0; i < len(pods); i++ {
		pod := pods[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		kind := kinds.Of(pod)
		if p.givenUpOn(nowhere, pod, nodes) {
			remaining = append(remaining, pod)
			continue
		}
		var node string
		var placed *v1.Pod
		var ferr *placement.FitError
		if p.FirstFit || p.FirstFitFor != nil && p.FirstFitFor(pod) {
			full := p.noRoomTest(noRoomOf, kind, pod)
			if dst, copied := runs.copyTo(pods[i:], nodes, last, full); copied != nil {
				for j, c := range copied {
					plan.ExistingNodes = append(plan.ExistingNodes, newPlacement(p.Engine, pods[i+j], dst, c))
				}
				i += len(copied) - 1
				last, lastOfKind[kind] = dst, copied[len(copied)-1].UID
				continue
			}
			node, placed, ferr = p.firstFit(pod, nodes, last, lastOfKind[kind], full)
			if ferr == nil {
				runs.placed(node, placed, full)
			}
		} else {
			// Nodes plainly short of the pod's requests are left out
			// before any plugin runs; scores are only taken among feasible
			// nodes, so the choice is the same. The search stops where
			// kube-scheduler's does (percentageOfNodesToScore).
			candidates := room.For(pod, kind, nodes)
			if len(candidates) == 0 {
				nowhere.Add(pod)
				remaining = append(remaining, pod)
				continue
			}
			node, placed, ferr = p.Engine.PlaceBestScanned(pod, kind, candidates, scan)
		}
		if ferr != nil {
			nowhere.Add(pod)
			remaining = append(remaining, pod)
			continue
		}
		last = node
		lastOfKind[kind] = placed.UID
		plan.ExistingNodes = append(plan.ExistingNodes, newPlacement(p.Engine, pod, node, placed))
	}
	return remaining, nil
}

// givenUpOn says whether pod is one Filter cannot tell from a pod that
// fit nowhere earlier in the pass (checked against every node under the
// verify switch).
func (p *Planner) givenUpOn(nowhere *estimator.Unplaceable, pod *v1.Pod, nodes []string) bool {
	if !nowhere.Holds(pod) {
		return false
	}
	if p.Engine.VerifiesShortcuts() {
		for _, n := range nodes {
			p.Engine.VerifyRejects("unplaceable pods", pod, n)
		}
	}
	return true
}

// noRoomTest is the kind's "plainly no room" test, made once per kind. A
// pod's claims may be allocated by then (shared with an earlier pod):
// only pods without claims share the test.
func (p *Planner) noRoomTest(noRoomOf map[string]func(string) bool, kind string, pod *v1.Pod) func(string) bool {
	full, ok := noRoomOf[kind]
	if !ok || len(pod.Spec.ResourceClaims) > 0 {
		full = p.Engine.NoRoom(pod)
		if len(pod.Spec.ResourceClaims) == 0 {
			noRoomOf[kind] = full
		}
	}
	return full
}

// firstFit places pod on the first node that takes it, searching from
// the node last (the previous pod's) on, in batches that grow from one: the
// plugins' PreFilter then sees only the batch's nodes (the placement engine scopes
// it to its candidates), so a fleet of thousands costs a few nodes a pod.
// Nodes plainly short of the pod's requests are skipped before any plugin
// runs.
func (p *Planner) firstFit(pod *v1.Pod, nodes []string, last string, like types.UID, full func(string) bool) (string, *v1.Pod, *placement.FitError) {
	start := max(slices.Index(nodes, last), 0)
	batch := make([]string, 0, 1) // most pods take the first node with room
	var ferr *placement.FitError
	for i := 0; i < len(nodes); i++ {
		n := nodes[(start+i)%len(nodes)]
		if full != nil && full(n) {
			continue
		}
		batch = append(batch, n)
		if len(batch) < cap(batch) && i < len(nodes)-1 {
			continue
		}
		var node string
		var placed *v1.Pod
		if node, placed, ferr = p.Engine.PlaceOnAnyNodeLike(pod, batch, like); ferr == nil {
			return node, placed, nil
		}
		batch = make([]string, 0, 2*cap(batch))
	}
	if len(batch) > 0 {
		return p.Engine.PlaceOnAnyNodeLike(pod, batch, like)
	}
	if ferr == nil {
		ferr = &placement.FitError{Pod: pod.Namespace + "/" + pod.Name, PreFilter: []placement.Reason{{Message: "no node has room"}}}
	}
	return "", nil, ferr
}

// bestOption evaluates every group with room on a fork and asks the
// expander to choose among those that help at least one pod.
func (p *Planner) bestOption(ctx context.Context, st *state, pods []*v1.Pod) (expander.Option, bool, error) {
	return p.bestOptionFor(ctx, st, pods, 1)
}

// bestOptionFor is bestOption among the groups that help at least need
// pods.
func (p *Planner) bestOptionFor(ctx context.Context, st *state, pods []*v1.Pod, need int) (expander.Option, bool, error) {
	s := newOptionSearch(p, st, pods, need)
	for _, g := range st.groups {
		if err := s.consider(ctx, g); err != nil {
			return expander.Option{}, false, err
		}
	}
	if len(s.options) == 0 {
		return expander.Option{}, false, nil
	}
	if expander.FewerNodesBetter(p.Expander) {
		if err := s.rescore(ctx); err != nil {
			return expander.Option{}, false, err
		}
	}
	chosen := p.Expander.Best(preferredChoices(s.options, s.rank))
	// An expander may allow no group (CA's priority expander with an
	// invalid ConfigMap): nothing is scaled up.
	if chosen.Group == "" {
		return chosen, false, nil
	}
	// The step is estimated from the packed option (its size decides
	// whether the scored check runs).
	return s.packed[chosen.Group], true, nil
}

// groupAnswer is one group's estimate as the expander sees it.
type groupAnswer struct {
	option expander.Option
	group  string
	rank   int
	// abandoned: least-waste would not choose it (wasteBound).
	abandoned bool
}

// alikeKeys keys groups by what makes their answers differ.
type alikeKeys struct {
	read  map[string]bool
	blind bool
	fresh *freshLabels
}

func newAlikeKeys(p *Planner, pods []*v1.Pod) alikeKeys {
	k := alikeKeys{}
	k.read, k.blind = labelsRead(p, pods)
	if !k.blind {
		k.fresh = newFreshLabels(p, pods)
	}
	return k
}

func (k alikeKeys) key(st *state, g *nodegroup.NodeGroup, room int) string {
	switch {
	case k.blind:
		// Labels no pod or DaemonSet reads do not change the answer.
		return fmt.Sprintf("%s/%d", st.signatureReading(g, k.read), room)
	case k.fresh != nil:
		// Nor do values no node has yet, where only equality is read.
		return fmt.Sprintf("%s/%d", k.fresh.signature(st, g), room)
	}
	return fmt.Sprintf("%s/%d", st.signature[g.Name], room)
}

// estimateOption estimates the group on a fork, given up on once the
// expander could not choose it over the best option so far.
func (p *Planner) estimateOption(ctx context.Context, st *state, group string, pods []*v1.Pod, bound optionBound, best bestSoFar) (groupAnswer, error) {
	snap := p.Engine.Snapshot()
	snap.Fork()
	res, err := st.estimateUnless(ctx, group, pods, false, bound.giveUp(st, snap, group, best))
	if err != nil {
		snap.Revert()
		return groupAnswer{}, err
	}
	if res.Abandoned {
		snap.Revert()
		p.abandoned++
		if p.Engine.VerifiesShortcuts() {
			if err := p.verifyAbandoned(ctx, st, group, pods, best); err != nil {
				return groupAnswer{}, err
			}
		}
		return groupAnswer{group: group, abandoned: true}, nil
	}
	o := expander.Option{Group: group, NewNodes: len(res.NewNodes), PodCount: len(res.Placed), Waste: waste(snap, res)}
	a := groupAnswer{option: o, group: group, rank: firstAvailableRank(p.Engine, st.kinds, res)}
	snap.Revert()
	return a, nil
}

// verifyAlike estimates g in full and reports a difference from the
// answer of the group whose signature it shares (under the verify switch).
func (p *Planner) verifyAlike(ctx context.Context, st *state, g *nodegroup.NodeGroup, pods []*v1.Pod, alike expander.Option) error {
	snap := p.Engine.Snapshot()
	snap.Fork()
	defer snap.Revert()
	res, err := st.estimate(ctx, g.Name, pods, false)
	if err != nil {
		return err
	}
	if got := waste(snap, res); len(res.NewNodes) != alike.NewNodes || len(res.Placed) != alike.PodCount || math.Abs(got-alike.Waste) > expander.Tie {
		placement.ShortcutDiffers("fresh label values", "group %s: %d new nodes, %d pods, waste %.6f in full; %d, %d, %.6f as group %s",
			g.Name, len(res.NewNodes), len(res.Placed), got, alike.NewNodes, alike.PodCount, alike.Waste, alike.Group)
	}
	return nil
}

// verifyAbandoned estimates g in full and reports when the expander could
// have chosen it over the best so far (under the verify switch).
func (p *Planner) verifyAbandoned(ctx context.Context, st *state, group string, pods []*v1.Pod, best bestSoFar) error {
	snap := p.Engine.Snapshot()
	snap.Fork()
	defer snap.Revert()
	res, err := st.estimate(ctx, group, pods, false)
	if err != nil {
		return err
	}
	o := st.priced(expander.Option{Group: group, NewNodes: len(res.NewNodes), PodCount: len(res.Placed), Waste: waste(snap, res)})
	switch p.Expander.Name() {
	case "least-waste":
		if o.Waste <= best.waste+expander.Tie {
			placement.ShortcutDiffers("waste bound", "group %s was given up on, but in full it wastes %.6f, no more than the best option's %.6f", group, o.Waste, best.waste)
		}
	case "price":
		if cost := expander.CostPerPod(o); cost <= best.costPerPod+expander.Tie {
			placement.ShortcutDiffers("price bound", "group %s was given up on, but in full it costs %.6f per pod, no more than the best option's %.6f", group, cost, best.costPerPod)
		}
	}
	return nil
}

// scaleUpOf is one estimate's scale-up: its group, new nodes and pods.
func scaleUpOf(engine *placement.Engine, res *estimator.Result) ScaleUp {
	su := ScaleUp{NodeGroup: res.Group, NewNodes: len(res.NewNodes)}
	if n := len(res.PlacedOrder); n > 0 { // none stays nil: JSON says null, as before
		su.Pods, su.Placements = make([]PodRef, 0, n), make([]Placement, 0, n)
	}
	for _, pod := range res.PlacedOrder {
		node := res.Placed[pod.UID]
		placed, _, _ := engine.Snapshot().Pod(pod.UID)
		su.Pods = append(su.Pods, RefOf(pod))
		su.Placements = append(su.Placements, newPlacement(engine, pod, node, placed))
	}
	return su
}

// addScaleUp adds a loop's scale-up to the group's entry, or starts a new
// entry when the sum would pass --max-nodes-per-scaleup (maxPerScaleUp,
// 0 for none): no entry adds more nodes than one scale-up may.
func (plan *Plan) addScaleUp(add ScaleUp, maxPerScaleUp int) {
	var su *ScaleUp
	for i := range plan.ScaleUps {
		// A gang's step stays whole: it is asked for atomically.
		if plan.ScaleUps[i].NodeGroup == add.NodeGroup && !plan.ScaleUps[i].Atomic && !add.Atomic {
			su = &plan.ScaleUps[i]
		}
	}
	if su == nil || (maxPerScaleUp > 0 && su.NewNodes+add.NewNodes > maxPerScaleUp) {
		plan.ScaleUps = append(plan.ScaleUps, ScaleUp{NodeGroup: add.NodeGroup, Atomic: add.Atomic, Gang: add.Gang, Topology: add.Topology})
		su = &plan.ScaleUps[len(plan.ScaleUps)-1]
	}
	su.NewNodes += add.NewNodes
	if su.Pods == nil && su.Placements == nil {
		// A new entry takes the step's lists as they are (scaleUpOf
		// made them for it) rather than a copy of thousands of pods.
		// Clipped, so that appending to this entry never writes into
		// another holder's (FirstLoop's) array.
		su.Pods, su.Placements = slices.Clip(add.Pods), slices.Clip(add.Placements)
		return
	}
	su.Pods = append(su.Pods, add.Pods...)
	su.Placements = append(su.Placements, add.Placements...)
}

func withoutPlaced(pods []*v1.Pod, placed map[types.UID]string) []*v1.Pod {
	out := pods[:0:0]
	for _, pod := range pods {
		if _, ok := placed[pod.UID]; !ok {
			out = append(out, pod)
		}
	}
	return out
}

// newPlacement is pod placed on node, with "driver/pool/device" and the
// DeviceClass of each device of the placed pod's extended-resource claim
// and claims.
func newPlacement(engine *placement.Engine, pod *v1.Pod, node string, placed *v1.Pod) Placement {
	p := Placement{Pod: RefOf(pod), Node: node}
	if placed == nil {
		return p
	}
	for _, c := range engine.ClaimsOf(placed) {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			p.Devices = append(p.Devices, fmt.Sprintf("%s/%s/%s", r.Driver, r.Pool, r.Device))
			p.DeviceClasses = append(p.DeviceClasses, RequestClass(c, r.Request))
		}
	}
	return p
}

// RequestClass is the DeviceClass a claim's request (or "request/sub" of a
// firstAvailable list) names, "" when it names none.
func RequestClass(c *resourceapi.ResourceClaim, request string) string {
	name, sub, _ := strings.Cut(request, "/")
	for _, r := range c.Spec.Devices.Requests {
		if r.Name != name {
			continue
		}
		if sub == "" {
			if r.Exactly != nil {
				return r.Exactly.DeviceClassName
			}
			return ""
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}
