// Package scaledown finds nodes whose pods could all run elsewhere: it
// removes each candidate's pods in the simulation (freeing their
// extended-resource and pod-owned claims, as eviction would) and places
// them again through the scheduler harness on the remaining nodes.
package scaledown

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/harness"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/scaleup"
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

// Rejection codes: CA's UnremovableReason names.
const (
	NotUnderutilized             = "NotUnderutilized"
	NoPlaceToMovePods            = "NoPlaceToMovePods"
	MinimalResourceLimitExceeded = "MinimalResourceLimitExceeded"
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
	Code   string `json:"code"`
	Reason string `json:"reason"`
	// Blocked is set when CA's drain rules keep the node.
	Blocked *drainability.Blocked `json:"blocked,omitempty"`
}

// Find returns the nodes that can be removed together, in the order they
// were chosen (least utilised first), and why the others cannot. It
// mutates the harness's snapshot: the chosen nodes' pods are moved and the
// nodes deleted. Run it on a fork to keep the snapshot.
func Find(h *harness.Harness, opts Options) ([]Removal, []Rejection) {
	snap := h.Snapshot()
	type candidate struct {
		name string
		util float64
	}
	var cands []candidate
	var rejected []Rejection
	for _, name := range snap.NodeNames() {
		node := snap.NodeInfo(name).Node()
		if opts.MayRemove != nil && !opts.MayRemove(node) {
			continue
		}
		if opts.Drainability != nil && drainability.ScaleDownDisabled(node) {
			b := opts.Drainability.Node(node, nil).Blocked
			rejected = append(rejected, Rejection{Node: name, Code: string(b.Reason), Reason: b.String(), Blocked: b})
			continue
		}
		u, devices := UtilizationOf(h, name, opts.Ignore)
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
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].util < cands[j].util })

	spare, amounts := minimums(h, opts)
	groupRoom := maps.Clone(opts.GroupRoom)
	removed := map[string]bool{}
	var out []Removal
	// Targets only fill up during a Find, so a target that rejected a kind
	// of pod keeps rejecting it: each kind skips the targets it already
	// knows are full.
	full := map[string]map[string]bool{}
	for _, c := range cands {
		group := ""
		if groupRoom != nil && opts.GroupOf != nil {
			group = opts.GroupOf(c.name)
			if group != "" && groupRoom[group] <= 0 {
				continue
			}
		}
		var node limits.Amounts
		if spare != nil {
			node = amounts(c.name)
			if over := limits.Exceeding(spare, node); len(over) > 0 {
				rejected = append(rejected, Rejection{Node: c.name, Code: MinimalResourceLimitExceeded, Reason: minimumReason(opts.Limits, spare, node, over)})
				continue
			}
		}
		moves, err := simulateDrain(h, c.name, removed, full, opts)
		if err != nil {
			r := Rejection{Node: c.name, Code: NoPlaceToMovePods, Reason: err.Error()}
			if b, ok := err.(*drainability.Blocked); ok {
				r.Code, r.Blocked = string(b.Reason), b
			}
			rejected = append(rejected, r)
			continue
		}
		removed[c.name] = true
		if group != "" {
			groupRoom[group]--
		}
		spare.Take(node)
		out = append(out, Removal{Node: c.name, Utilization: c.util, Moves: moves})
	}
	return out, rejected
}

// simulateDrain moves, in the snapshot, every pod off the node onto nodes
// that stay, or changes
// nothing and says which pod could not move (a *drainability.Blocked when
// CA's rules keep the node).
func simulateDrain(h *harness.Harness, nodeName string, removed map[string]bool, full map[string]map[string]bool, opts Options) (map[string]string, error) {
	snap := h.Snapshot()
	var targets []string
	for _, n := range snap.NodeNames() {
		if n != nodeName && !removed[n] && (opts.MayReceive == nil || opts.MayReceive(snap.NodeInfo(n).Node())) {
			targets = append(targets, n)
		}
	}
	ni := snap.NodeInfo(nodeName)
	var uids []types.UID
	var checked drainability.NodeDrain
	if opts.Drainability != nil {
		var pods []*v1.Pod
		for _, pi := range ni.Pods {
			pods = append(pods, pi.GetPod())
		}
		checked = opts.Drainability.Node(ni.Node(), pods)
		if checked.Blocked != nil {
			return nil, checked.Blocked
		}
		for _, p := range checked.Move {
			uids = append(uids, p.UID)
		}
	} else {
		for _, pi := range ni.Pods {
			if !leavesWithNode(pi.GetPod()) {
				uids = append(uids, pi.GetPod().UID)
			}
		}
	}
	snap.Fork()
	moves := map[string]string{}
	// Targets found full count only if this drain is kept: a revert frees
	// the room its moved pods took.
	var learned [][2]string
	for _, uid := range uids {
		pod, _, _ := snap.Pod(uid)
		pending, err := h.Remove(uid)
		if err != nil {
			snap.Revert()
			return nil, err
		}
		if scaleup.IsExpendable(pod, opts.ExpendablePodsPriorityCutoff) {
			continue
		}
		kind := estimator.EquivalenceKey(pending)
		if full[kind] == nil {
			full[kind] = map[string]bool{}
		}
		var open []string
		for _, t := range targets {
			if !full[kind][t] {
				open = append(open, t)
			}
		}
		to, _, ferr := h.PlaceOnAnyNode(pending, open)
		if ferr != nil {
			snap.Revert()
			return nil, fmt.Errorf("pod %s/%s fits no other node: %s", pod.Namespace, pod.Name, ferr.Error())
		}
		for _, t := range open {
			if t == to {
				break
			}
			learned = append(learned, [2]string{kind, t})
		}
		moves[pod.Namespace+"/"+pod.Name] = to
	}
	if err := snap.RemoveNode(nodeName); err != nil {
		snap.Revert()
		return nil, err
	}
	snap.Commit()
	if opts.Drainability != nil {
		opts.Drainability.Commit(checked)
	}
	for _, l := range learned {
		full[l[0]][l[1]] = true
	}
	return moves, nil
}

// minimums returns, when a minimum is set, how much of each limited
// resource the cluster may lose, and a function counting a node (to be
// called before the node is removed from the snapshot).
func minimums(h *harness.Harness, opts Options) (limits.Amounts, func(name string) limits.Amounts) {
	if !opts.Limits.HasMin() {
		return nil, nil
	}
	snap := h.Snapshot()
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

func leavesWithNode(pod *v1.Pod) bool {
	return drainability.IsMirrorPod(pod) || drainability.IsDaemonSetPod(pod)
}

// UtilizationOf is the share of a node in use: of its DRA devices when
// it has any (an idle GPU node is idle whatever its CPU), else the larger
// of requested CPU and memory over allocatable, without the pods ignore
// names on either side; and whether it was measured on devices.
//
// Devices of pools without shared counters count as allocated over
// published, all such pools together. A pool with shared counters counts
// by its counters, as CA does since kubernetes/autoscaler#8559: counting
// its devices would read eight H100s all taken whole as 8 of the 160
// devices NVIDIA's DynamicMIG publishes, 5%, and drain a full node. The
// node's utilization is the highest of these.
func UtilizationOf(h *harness.Harness, nodeName string, ignore UtilizationIgnores) (float64, bool) {
	snap := h.Snapshot()
	var devices, used int
	var util float64
	measured := false
	for _, p := range dynres.PoolsForNode(snap, nodeName) {
		if p.Partitioned() {
			if u, ok := p.Utilization(); ok {
				util, measured = max(util, u), true
			}
			continue
		}
		for _, d := range p.Devices {
			devices++
			if d.Allocated {
				used++
			}
		}
	}
	if devices > 0 {
		util, measured = max(util, float64(used)/float64(devices)), true
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

// Verdicts of NodeVerdict: what scale-down makes of a node this loop.
const (
	// Removable: it would be removed now.
	Removable = "Removable"
	// Unneeded: it may go, once the delay its reason names has passed.
	Unneeded = "Unneeded"
	// Kept: a rule keeps it; Code is CA's reason name.
	Kept = "Kept"
)

// More of CA's unremovable reason names, for nodes no candidate search
// reaches.
const (
	NotUnneededLongEnough   = "NotUnneededLongEnough"
	NotUnreadyLongEnough    = "NotUnreadyLongEnough"
	NodeGroupMinSizeReached = "NodeGroupMinSizeReached"
	CurrentlyBeingDeleted   = "CurrentlyBeingDeleted"
)

// NodeVerdict answers "why is this node not removed?" for one node of an
// autoscaled group.
type NodeVerdict struct {
	Node      string `json:"node"`
	NodeGroup string `json:"nodeGroup"`
	// Verdict is Removable, Unneeded or Kept.
	Verdict string `json:"verdict"`
	// Code is CA's reason name when the node stays (NotUnderutilized,
	// NotUnneededLongEnough, BlockedByPod, NodeGroupMinSizeReached,
	// ScaleDownDisabledAnnotation, NoPlaceToMovePods, ...).
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
}
