// Package scaledown finds nodes whose pods could all run elsewhere: it
// removes each candidate's pods in the simulation (freeing their
// extended-resource and pod-owned claims, as eviction would) and places
// them again through the placement engine on the remaining nodes.
package scaledown

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/placement"
)

// Options bound what may be removed.
type Options struct {
	// UtilizationThreshold: only nodes used below it are candidates (0..1).
	UtilizationThreshold float64
	// ThresholdFor, when set, gives a node's threshold instead (its
	// group's own; devices says its utilization is that of its DRA
	// devices).
	ThresholdFor func(node *v1.Node, devices bool) float64
	// MayRemove leaves nodes out without a reason (not managed, not
	// ready); nil allows all.
	MayRemove func(node *v1.Node) bool
	// Drainability applies CA's rules (node scale-down-disabled
	// annotation, pods that block, PDB budgets across the batch). nil
	// moves every pod except mirror and DaemonSet pods, which leave with
	// the node, and ignores annotations: what-if planning on dumps.
	Drainability *drainability.Checker
	// MayReceive, when set, says which nodes a removed node's pods may
	// move to. The live loop allows registered Ready nodes only, as CA
	// does: a node still coming up (upcoming, or registered but not
	// started) may never arrive, and draining a running node onto it
	// would leave its pods pending.
	MayReceive func(node *v1.Node) bool
	// Limits: no removal takes the cluster below a minimum of
	// --cores-total, --memory-total or --gpu-total (CA's
	// MinimalResourceLimitExceeded). The nodes counted are those in the
	// snapshot but the Uncounted ones (nodes already being removed).
	Limits    limits.Limits
	Matcher   *dynres.Matcher
	Uncounted func(node *v1.Node) bool
	// GroupRoom, when set, is per node group (GroupOf a node) how many
	// nodes it may still lose before its min size; nodes beyond it are
	// left out silently, as the caller reports group minimums itself, so
	// that they do not use up a resource minimum's spare.
	GroupRoom map[string]int
	GroupOf   func(node string) string
	// ExpendablePodsPriorityCutoff: pods whose priority is below it are
	// evicted without a place elsewhere, as CA treats expendable pods;
	// nil: every pod must fit elsewhere.
	ExpendablePodsPriorityCutoff *int32
	// Ignore leaves pods out of a node's CPU and memory utilization
	// (--ignore-daemonsets-utilization, --ignore-mirror-pods-utilization).
	Ignore UtilizationIgnores
	// Stop ends the search early, as CA's planner does; the zero value
	// evaluates every candidate.
	Stop EarlyStop
	// Gangs are the running gangs: no node is removed whose removal (with
	// the nodes chosen before it and those Uncounted) leaves a gang fewer
	// scheduled pods than its minCount. nil: pods are moved one by one.
	Gangs *gang.Index
	// stateCopies builds the drain's state copies (nil: placement's);
	// tests switch copies off with it.
	stateCopies func(*placement.Engine) *placement.StateCopies
}

// EarlyStop bounds one search as CA's scale-down planner does: once
// enough nodes are found unneeded for the removals a loop can start,
// simulating more is wasted, and a slow simulation must not hold up the
// loop. Candidates found unneeded in the previous loop go first, so
// those stay tracked across loops.
type EarlyStop struct {
	// MaxUnneeded: stop once this many removable nodes are found (0: no
	// bound). Reason says why, for the nodes left unevaluated.
	MaxUnneeded int
	Reason      string
	// Expired, when set, is asked before each candidate: true ends the
	// search (--scale-down-simulation-timeout).
	Expired func() bool
	// Previously are last loop's unneeded nodes.
	Previously map[string]bool
}

// UtilizationIgnores say which pods a node's CPU and memory utilization
// leaves out, as CA's flags do: their requests count neither as used nor
// as the node's, so a node that runs only DaemonSet pods is idle. A
// node's device utilization counts every pod, as CA's does.
type UtilizationIgnores struct {
	DaemonSetPods, MirrorPods bool
}

func (ig UtilizationIgnores) ignores(pod *v1.Pod) bool {
	return ig.DaemonSetPods && drainability.IsDaemonSetPod(pod) || ig.MirrorPods && drainability.IsMirrorPod(pod)
}

// Code is why a node stays: CA's UnremovableReason name (or draxr's, where
// CA has none), stable for people and tools to act on. Drain rules give
// their own (drainability.Reason, converted).
type Code string

// Rejection codes: CA's UnremovableReason names.
const (
	NotUnderutilized             Code = "NotUnderutilized"
	NoPlaceToMovePods            Code = "NoPlaceToMovePods"
	MinimalResourceLimitExceeded Code = "MinimalResourceLimitExceeded"
	// GangBelowMinCount: the node runs pods of a gang that would keep
	// fewer than its minCount pods without it (draxr's code: CA does not
	// know gangs).
	GangBelowMinCount Code = "GangBelowMinCount"
	// TopologyGangNode: the node runs pods of a gang that must stay in one
	// topology domain; a moved pod could land in another, so the gang's
	// nodes are kept while it runs.
	TopologyGangNode Code = "TopologyGangNode"
	// NotEvaluated: the search stopped early (EarlyStop) before this
	// candidate; it is evaluated again next loop. draxr's code: CA leaves
	// such nodes out of its status.
	NotEvaluated Code = "NotEvaluated"
)

// Removal is a node that can go, and where its pods would move.
type Removal struct {
	Node        string            `json:"node"`
	Utilization float64           `json:"utilization"`
	Moves       map[string]string `json:"moves"` // pod -> new node
}

// Rejection says why a candidate node stays.
type Rejection struct {
	Node string `json:"node"`
	// Code is CA's UnremovableReason name: ScaleDownDisabledAnnotation,
	// NotUnderutilized, BlockedByPod, BlockedByOnCompletionPod,
	// NoPlaceToMovePods.
	Code   Code   `json:"code"`
	Reason string `json:"reason"`
	// Blocked is set when CA's drain rules keep the node.
	Blocked *drainability.Blocked `json:"blocked,omitempty"`
}

// Find returns the nodes that can be removed together, in the order they
// were chosen (least utilised first), and why the others cannot. It
// mutates the placement engine's snapshot: the chosen nodes' pods are moved and the
// nodes deleted. Run it on a fork to keep the snapshot.
func Find(sim *placement.Engine, opts Options) ([]Removal, []Rejection) {
	cands, rejected := candidates(sim, opts)
	s := newSearch(sim, opts, cands)
	s.rejected = rejected
	for i, c := range cands {
		if why := opts.Stop.reached(len(s.out)); why != "" {
			for _, skipped := range cands[i:] {
				s.rejected = append(s.rejected, Rejection{Node: skipped.name, Code: NotEvaluated, Reason: why})
			}
			break
		}
		s.consider(c)
	}
	return s.out, s.rejected
}

// candidate is a node that may go, with its utilization.
type candidate struct {
	name string
	util float64
}

// candidates are the nodes that may go and are underutilized, in the
// order they are tried: those unneeded in the previous search first
// (EarlyStop.Previously), then the least utilized; and why the other
// nodes that may go are not candidates.
func candidates(sim *placement.Engine, opts Options) ([]candidate, []Rejection) {
	snap := sim.Snapshot()
	var cands []candidate
	var rejected []Rejection
	for _, name := range snap.NodeNames() {
		node := snap.NodeInfo(name).Node()
		if opts.MayRemove != nil && !opts.MayRemove(node) {
			continue
		}
		if opts.Drainability != nil && drainability.ScaleDownDisabled(node) {
			b := opts.Drainability.Node(node, nil).Blocked
			rejected = append(rejected, Rejection{Node: name, Code: Code(b.Reason), Reason: b.String(), Blocked: b})
			continue
		}
		u, devices := UtilizationOf(sim, name, opts.Ignore)
		threshold := opts.UtilizationThreshold
		if opts.ThresholdFor != nil {
			threshold = opts.ThresholdFor(node, devices)
		}
		if u >= threshold {
			rejected = append(rejected, Rejection{Node: name, Code: NotUnderutilized, Reason: fmt.Sprintf("utilization %.2f is not below %.2f", u, threshold)})
			continue
		}
		cands = append(cands, candidate{name, u})
	}
	prev := opts.Stop.Previously
	sort.SliceStable(cands, func(i, j int) bool {
		if pi, pj := prev[cands[i].name], prev[cands[j].name]; pi != pj {
			return pi
		}
		return cands[i].util < cands[j].util
	})
	return cands, rejected
}

// search is Find's state as it goes through the candidates: what the
// nodes chosen so far take from the groups' room above their min sizes,
// from the resource minimums and from the gangs, and its findings.
type search struct {
	opts      Options
	d         *drainer
	spare     limits.Amounts
	amounts   func(name string) limits.Amounts
	groupRoom map[string]int
	gone      map[string]bool // nodes chosen, and those Uncounted where gangs are read
	out       []Removal
	rejected  []Rejection
}

func newSearch(sim *placement.Engine, opts Options, cands []candidate) *search {
	snap := sim.Snapshot()
	s := &search{opts: opts, groupRoom: maps.Clone(opts.GroupRoom), gone: map[string]bool{}}
	s.spare, s.amounts = minimums(sim, opts)
	if opts.Gangs != nil && opts.Uncounted != nil {
		for _, name := range snap.NodeNames() {
			if opts.Uncounted(snap.NodeInfo(name).Node()) {
				s.gone[name] = true
			}
		}
	}
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.name
	}
	s.d = newDrainer(sim, opts, targetOrder(snap.NodeNames(), names))
	return s
}

// consider removes candidate c in the snapshot when its group, the
// minimums and its gangs allow and its pods can move, or records why not
// (nothing, where its group is at its min size).
func (s *search) consider(c candidate) {
	group := ""
	if s.groupRoom != nil && s.opts.GroupOf != nil {
		group = s.opts.GroupOf(c.name)
		if group != "" && s.groupRoom[group] <= 0 {
			return
		}
	}
	var node limits.Amounts
	if s.spare != nil {
		node = s.amounts(c.name)
		if over := limits.Exceeding(s.spare, node); len(over) > 0 {
			s.rejected = append(s.rejected, Rejection{Node: c.name, Code: MinimalResourceLimitExceeded, Reason: minimumReason(s.opts.Limits, s.spare, node, over)})
			return
		}
	}
	if code, why := gangBroken(s.opts.Gangs, s.gone, c.name); why != "" {
		s.rejected = append(s.rejected, Rejection{Node: c.name, Code: code, Reason: why})
		return
	}
	moves, err := s.d.drain(c.name)
	if err != nil {
		r := Rejection{Node: c.name, Code: NoPlaceToMovePods, Reason: err.Error()}
		if b, ok := err.(*drainability.Blocked); ok {
			r.Code, r.Blocked = Code(b.Reason), b
		}
		s.rejected = append(s.rejected, r)
		return
	}
	if group != "" {
		s.groupRoom[group]--
	}
	s.spare.Take(node)
	s.gone[c.name] = true
	s.out = append(s.out, Removal{Node: c.name, Utilization: c.util, Moves: moves})
}

// gangBroken says which gang removing node (with the nodes gone) leaves
// below its minCount or moves out of its topology domain, or "".
func gangBroken(gangs *gang.Index, gone map[string]bool, node string) (Code, string) {
	for _, g := range gangs.OnNode(node) {
		if g.TopologyKey != "" {
			return TopologyGangNode, fmt.Sprintf("runs pods of %s, which must run in one domain of %s: the nodes of a running topology gang are kept",
				g, g.TopologyKey)
		}
		if left := g.ScheduledOutside(node, gone); left < g.MinCount {
			return GangBelowMinCount, fmt.Sprintf("runs pods of %s, a gang of minCount %d: without the node %d of its %d scheduled pods are left, "+
				"and the scheduler binds a gang's pods only all together", g, g.MinCount, left, g.Scheduled)
		}
	}
	return "", ""
}

// reached says why the search stops before the next candidate, or "".
func (s EarlyStop) reached(found int) string {
	switch {
	case s.MaxUnneeded > 0 && found >= s.MaxUnneeded:
		return s.Reason
	case s.Expired != nil && s.Expired():
		return "not simulated this loop: the scale-down simulation ran out of --scale-down-simulation-timeout"
	}
	return ""
}

// minimums returns, when a minimum is set, how much of each limited
// resource the cluster may lose, and a function counting a node (to be
// called before the node is removed from the snapshot).
func minimums(sim *placement.Engine, opts Options) (limits.Amounts, func(name string) limits.Amounts) {
	if !opts.Limits.HasMin() {
		return nil, nil
	}
	snap := sim.Snapshot()
	matcher := opts.Matcher
	if matcher == nil {
		matcher = dynres.NewMatcher()
	}
	amounts := func(name string) limits.Amounts {
		var extended []dynres.Entry
		if opts.Limits.NeedsDevices() {
			extended = matcher.ForNode(snap, name)
		}
		return opts.Limits.Of(snap.NodeInfo(name).Node(), extended)
	}
	total := limits.Amounts{}
	for _, name := range snap.NodeNames() {
		if opts.Uncounted != nil && opts.Uncounted(snap.NodeInfo(name).Node()) {
			continue
		}
		total.Add(amounts(name), 1)
	}
	return opts.Limits.Spare(total), amounts
}

// minimumReason says which minimum a node's removal would break, with
// the numbers.
func minimumReason(l limits.Limits, spare, node limits.Amounts, over []string) string {
	parts := make([]string, len(over))
	for i, r := range over {
		parts[i] = fmt.Sprintf("%s: the cluster is %s above the minimum, the node has %s",
			l.Flag(r), limits.Quantity(r, max(spare[r], 0)), limits.Quantity(r, node[r]))
	}
	return fmt.Sprintf("min cluster %s limit reached (%s)", strings.Join(over, ", "), strings.Join(parts, "; "))
}

// UtilizationOf is the share of a node in use: of its DRA devices when
// it has any (an idle GPU node is idle whatever its CPU), else the larger
// of requested CPU and memory over allocatable, without the pods ignore
// names on either side; and whether it was measured on devices.
//
// Devices of pools without shared counters count as allocated over
// published, all such pools together; a device allocated several times
// (KEP-5075) counts by the capacity its shares consume. A pool with shared counters counts
// by its counters, as CA does since kubernetes/autoscaler#8559: counting
// its devices would read eight H100s all taken whole as 8 of the 160
// devices NVIDIA's DynamicMIG publishes, 5%, and drain a full node. The
// node's utilization is the highest of these.
func UtilizationOf(sim *placement.Engine, nodeName string, ignore UtilizationIgnores) (float64, bool) {
	snap := sim.Snapshot()
	var devices int
	var used, util float64
	measured := false
	for _, p := range devicepools.ForNode(snap, nodeName) {
		if p.Partitioned() {
			if u, ok := p.Utilization(); ok {
				util, measured = max(util, u), true
			}
			continue
		}
		for _, d := range p.Devices {
			devices++
			used += d.Use
		}
	}
	if devices > 0 {
		util, measured = max(util, used/float64(devices)), true
	}
	if measured {
		return util, true
	}
	ni := snap.NodeInfo(nodeName)
	requestedCPU, requestedMemory := ni.Requested.MilliCPU, ni.Requested.Memory
	allocatableCPU, allocatableMemory := ni.Allocatable.MilliCPU, ni.Allocatable.Memory
	for _, p := range ni.Pods {
		if ignore != (UtilizationIgnores{}) && ignore.ignores(p.GetPod()) {
			r := p.CalculateResource().Resource
			requestedCPU -= r.GetMilliCPU()
			allocatableCPU -= r.GetMilliCPU()
			requestedMemory -= r.GetMemory()
			allocatableMemory -= r.GetMemory()
		}
	}
	share := func(requested, allocatable, nodeAllocatable int64) float64 {
		switch {
		case nodeAllocatable <= 0, requested <= 0:
			return 0
		case allocatable <= 0:
			return 1 // the ignored pods fill the node: keep it, not divide by zero
		}
		return float64(requested) / float64(allocatable)
	}
	return max(share(requestedCPU, allocatableCPU, ni.Allocatable.MilliCPU),
		share(requestedMemory, allocatableMemory, ni.Allocatable.Memory)), false
}

// Verdict is what scale-down makes of a node this loop.
type Verdict string

// Verdicts of NodeVerdict.
const (
	// Removable: it would be removed now.
	Removable Verdict = "Removable"
	// Unneeded: it may go, once the delay its reason names has passed.
	Unneeded Verdict = "Unneeded"
	// Kept: a rule keeps it; Code is CA's reason name.
	Kept Verdict = "Kept"
)

// More of CA's unremovable reason names, for nodes no candidate search
// reaches.
const (
	NotUnneededLongEnough   Code = "NotUnneededLongEnough"
	NotUnreadyLongEnough    Code = "NotUnreadyLongEnough"
	NodeGroupMinSizeReached Code = "NodeGroupMinSizeReached"
	CurrentlyBeingDeleted   Code = "CurrentlyBeingDeleted"
	// NotAutoscaled: the node's group is no longer one of the provider's.
	NotAutoscaled Code = "NotAutoscaled"
)

// NodeVerdict answers "why is this node not removed?" for one node of an
// autoscaled group.
type NodeVerdict struct {
	Node      string `json:"node"`
	NodeGroup string `json:"nodeGroup"`
	// Verdict is Removable, Unneeded or Kept.
	Verdict Verdict `json:"verdict"`
	// Code is CA's reason name when the node stays (NotUnderutilized,
	// NotUnneededLongEnough, BlockedByPod, NodeGroupMinSizeReached,
	// ScaleDownDisabledAnnotation, NoPlaceToMovePods, ...).
	Code   Code   `json:"code,omitempty"`
	Reason string `json:"reason"`
}
