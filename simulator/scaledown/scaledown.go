// Package scaledown finds nodes whose pods could all run elsewhere: it
// removes each candidate's pods in the simulation (freeing their
// extended-resource and pod-owned claims, as eviction would) and places
// them again through the placement engine on the remaining nodes.
package scaledown

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
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

// drainer simulates draining candidates one after another in one
// snapshot. Targets only fill up during a Find (pods leave only nodes that
// go), so a target that rejected a kind of pod keeps rejecting it: pods
// move as kinds, each kind skipping the targets known to reject it, and
// are tried on a few targets at a time, since the scheduler's PreFilter
// and Filter cost grows with the candidates it is given. A pod leaving
// that frees what other targets read (a device of a shared pool, a
// zone its anti-affinity kept a kind off: see relaxes) drops what was
// learned.
type drainer struct {
	sim  *placement.Engine
	snap *snapshot.Snapshot
	opts Options
	// order is the snapshot's nodes at the start, in the order targets
	// are tried (targetOrder); gone marks those removed since.
	order []string
	pos   map[string]int
	gone  []bool
	// receive caches opts.MayReceive per node (-1 not asked, 0 no, 1 yes).
	receive []int8
	// kinds keys pods with claims of their own by what the claims ask:
	// evicted, such a pod's claim is deallocated and allocated again
	// wherever it lands, as a fresh claim would be.
	kinds *estimator.Kinds
	// kindOf caches kinds by pod UID: Remove hands out a new pending pod
	// each move, while what its kind reads (the spec, and its own claim,
	// deallocated by every Remove to the same status) stays the same.
	kindOf map[types.UID]podKind
	full   map[string]*rejecting
	// shared are the pools of slices not local to one node (driver/pool):
	// a pod leaving a drained node frees their devices for every target,
	// so what targets rejected before no longer holds.
	shared map[string]bool
	// spreadsByDefault: the profile's hard default spread constraints
	// count pods on every node, for pods without constraints of their own,
	// so their verdicts change as pods move: nothing is learned.
	spreadsByDefault bool
	// copies, when not nil, copies a kind's placement onto a target in
	// the state of one that took the kind earlier (placement.StateCopies).
	copies *placement.StateCopies
}

// podKind is a drained pod's kind and whether its placements may be
// copied.
type podKind struct {
	kind string
	copy bool
}

// rejecting is what a kind of pod knows about the targets: which reject
// it, and the first target in order not known to.
type rejecting struct {
	nodes map[int]bool
	from  int
}

// targetOrder is the order drained pods try targets in: nodes that are
// not candidates first, then the candidates from the last to be drained
// to the first. Pods moved onto a node drained after theirs would move
// again with it (at 8,000 nodes of CA's scenario, two and a half moves a
// pod); the fullest nodes are the ones to fill, as bin packing would.
func targetOrder(nodes, cands []string) []string {
	isCandidate := make(map[string]bool, len(cands))
	for _, c := range cands {
		isCandidate[c] = true
	}
	order := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if !isCandidate[n] {
			order = append(order, n)
		}
	}
	for i := len(cands) - 1; i >= 0; i-- {
		order = append(order, cands[i])
	}
	return order
}

func newDrainer(sim *placement.Engine, opts Options, order []string) *drainer {
	newCopies := opts.stateCopies
	if newCopies == nil {
		newCopies = (*placement.Engine).NewStateCopies
	}
	snap := sim.Snapshot()
	var pods []*v1.Pod
	for _, name := range order {
		for _, pi := range snap.NodeInfo(name).Pods {
			pods = append(pods, pi.GetPod())
		}
	}
	var shared map[string]bool
	for _, s := range snap.SlicesForNode("") {
		if shared == nil {
			shared = map[string]bool{}
		}
		shared[s.Spec.Driver+"/"+s.Spec.Pool.Name] = true
	}
	pos := make(map[string]int, len(order))
	receive := make([]int8, len(order))
	for i, name := range order {
		pos[name], receive[i] = i, -1
	}
	return &drainer{sim: sim, snap: snap, opts: opts, order: order, pos: pos, gone: make([]bool, len(order)), receive: receive,
		kinds: estimator.NewKinds(snap, pods), kindOf: make(map[types.UID]podKind, len(pods)), full: map[string]*rejecting{}, shared: shared,
		spreadsByDefault: sim.SpreadsByDefault(),
		copies:           newCopies(sim)}
}

// mayReceive says whether the i-th node may take pods.
func (d *drainer) mayReceive(i int) bool {
	if d.gone[i] {
		return false
	}
	if d.receive[i] < 0 {
		d.receive[i] = 0
		if d.opts.MayReceive == nil || d.opts.MayReceive(d.snap.NodeInfo(d.order[i]).Node()) {
			d.receive[i] = 1
		}
	}
	return d.receive[i] == 1
}

// drain moves, in the snapshot, every pod off the node onto nodes that
// stay and removes the node, or changes nothing and says which pod could
// not move (a *drainability.Blocked when CA's rules keep the node).
func (d *drainer) drain(nodeName string) (map[string]string, error) {
	snap, opts := d.snap, d.opts
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
	self, ok := d.pos[nodeName]
	if !ok {
		return nil, fmt.Errorf("node %s not found in the snapshot", nodeName)
	}
	snap.Fork()
	// All the node's pods leave before any is placed, as CA simulates a
	// drain: none of them constrains where the others go, and a claim
	// they share is freed to move with them. Where they could not differ
	// (independent), each leaves just before it is placed, so that a
	// drain failing at its first pod removes one pod, not all.
	oneByOne := d.independent(uids)
	if oneByOne && d.sim.VerifiesShortcuts() {
		d.verifyOneByOne(nodeName, uids, self)
	}
	// Targets found rejecting a kind count for the rest of this drain,
	// and after it only if it is kept: a revert frees the room its moved
	// pods took.
	learned := map[string]map[int]bool{}
	moves, err := d.move(uids, self, oneByOne, learned)
	if err != nil {
		snap.Revert()
		return nil, err
	}
	if err := snap.RemoveNode(nodeName); err != nil {
		snap.Revert()
		return nil, err
	}
	snap.Commit()
	if opts.Drainability != nil {
		opts.Drainability.Commit(checked)
	}
	d.gone[self] = true
	for kind, nodes := range learned {
		known := d.full[kind]
		maps.Copy(known.nodes, nodes)
		for known.from < len(d.order) && (d.gone[known.from] || known.nodes[known.from]) {
			known.from++
		}
	}
	return moves, nil
}

// move removes the pods and places them on other nodes, all removed
// first or each just before it is placed (oneByOne), and returns where
// they went, or why a pod could not move; it records in learned the
// targets found rejecting each kind. It leaves the snapshot changed
// either way: the caller forks.
func (d *drainer) move(uids []types.UID, self int, oneByOne bool, learned map[string]map[int]bool) (map[string]string, error) {
	moves := map[string]string{}
	placeOne := func(pod, pending *v1.Pod) error {
		var known *rejecting
		var seen map[int]bool
		var pk podKind
		// A pod's own pod affinity or spread constraints (or the
		// profile's) can accept a target later, once other pods have
		// moved: nothing is learned.
		if !readsLabels(pending) && !d.spreadsByDefault {
			var ok bool
			if pk, ok = d.kindOf[pending.UID]; !ok {
				pk = podKind{kind: d.kinds.Of(pending)}
				pk.copy = d.copies != nil && placement.Eligible(pending, d.kinds.OwnsNamedClaims(pending))
				d.kindOf[pending.UID] = pk
			}
			kind := pk.kind
			if known = d.full[kind]; known == nil {
				known = &rejecting{nodes: map[int]bool{}}
				d.full[kind] = known
			}
			if seen = learned[kind]; seen == nil {
				seen = map[int]bool{}
				learned[kind] = seen
			}
		}
		to, ferr := d.place(pending, pk, self, known, seen)
		if ferr != nil {
			return fmt.Errorf("pod %s/%s fits no other node: %s", pod.Namespace, pod.Name, ferr.Error())
		}
		moves[pod.Namespace+"/"+pod.Name] = to
		return nil
	}
	type leaving struct{ pod, pending *v1.Pod }
	var placeAll []leaving
	for _, uid := range uids {
		pod, _, _ := d.snap.Pod(uid)
		expendable := scaleup.IsExpendable(pod, d.opts.ExpendablePodsPriorityCutoff)
		if d.relaxes(pod, expendable) {
			clear(d.full)
		}
		pending, err := d.sim.Remove(uid)
		if err != nil {
			return nil, err
		}
		switch {
		case expendable:
		case oneByOne:
			if err := placeOne(pod, pending); err != nil {
				return nil, err
			}
		default:
			placeAll = append(placeAll, leaving{pod, pending})
		}
	}
	for _, l := range placeAll {
		if err := placeOne(l.pod, l.pending); err != nil {
			return nil, err
		}
	}
	return moves, nil
}

// relaxes reports whether the pod leaving its node may let targets take
// pods they rejected: it holds a device of a pool not local to one node
// (every target may take it once freed), its required anti-affinity keeps
// a kind off more nodes than its own (a zone, say: off it keeps the kind
// off the zone no longer), or, expendable, it leaves a volume claim a
// pod elsewhere could not share (ReadWriteOncePod).
func (d *drainer) relaxes(pod *v1.Pod, expendable bool) bool {
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if term.TopologyKey != v1.LabelHostname {
				return true
			}
		}
	}
	if expendable {
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				return true
			}
		}
	}
	if d.shared == nil {
		return false
	}
	for _, c := range d.sim.ClaimsOf(pod) {
		if a := c.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if d.shared[r.Driver+"/"+r.Pool] {
					return true
				}
			}
		}
	}
	return false
}

// verifyOneByOne holds pods leaving one by one to all leaving first
// (placement.VerifyShortcutsEnv): on forks, undone, both must move the
// pods to the same nodes or fail with the same reason.
func (d *drainer) verifyOneByOne(node string, uids []types.UID, self int) {
	d.snap.Fork()
	want, wantErr := d.move(uids, self, false, map[string]map[int]bool{})
	d.snap.Revert()
	d.snap.Fork()
	got, gotErr := d.move(uids, self, true, map[string]map[int]bool{})
	d.snap.Revert()
	if !maps.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		placement.ShortcutDiffers("drain one by one", "draining node %s moved pods to %v (error %v), all leaving first to %v (error %v)",
			node, got, gotErr, want, wantErr)
	}
}

// independent reports whether the pods may leave one by one, each just
// before it is placed, with the placements and the reason of a failure
// of all leaving first: where state copies may run (every slice local to
// one node, no placed pod with inter-pod terms, no hard default
// spreading), a pod on the drained node changes no other node's verdict,
// so removing the others first matters only through what they share
// with the pod: a claim, a volume claim (ReadWriteOncePod), or spread
// constraints that count them. Pods with none of these are independent.
func (d *drainer) independent(uids []types.UID) bool {
	if d.copies == nil {
		return false
	}
	// Claims by namespace and name, without allocating: a node runs a few
	// pods of a few claims each. An extended-resource claim is its pod's
	// own, never shared.
	type claimKey struct{ namespace, name string }
	var buf [16]claimKey
	claims := buf[:0]
	for _, uid := range uids {
		pod, _, ok := d.snap.Pod(uid)
		if !ok || len(pod.Spec.TopologySpreadConstraints) > 0 {
			return false
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				return false
			}
		}
		for i := range pod.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
			if err != nil {
				return false
			}
			if name == nil {
				continue
			}
			key := claimKey{pod.Namespace, *name}
			if slices.Contains(claims, key) {
				return false
			}
			claims = append(claims, key)
		}
	}
	return true
}

// place puts a pending pod on the first target, in order, that takes it,
// skipping the node being drained (self) and those known or seen (this
// drain) to reject its kind (nil: nothing is known), and records in seen
// the targets it tried before. It tries a few targets at a time, twice as
// many each round. A pod whose kind may be copied goes, when the first
// target of a round is in the state of one that took the kind, where the
// kind went there (placement.StateCopies): the target the round would
// place it on, as the first to accept it.
func (d *drainer) place(pod *v1.Pod, pk podKind, self int, known *rejecting, seen map[int]bool) (string, *placement.FitError) {
	i := 0
	verify := d.sim.VerifiesShortcuts()
	if known != nil && !verify {
		i = known.from
	}
	all := &placement.FitError{Pod: pod.Namespace + "/" + pod.Name, PerNode: map[string][]placement.Reason{}}
	idx := make([]int, 0, firstRound)
	cands := make([]string, 0, firstRound)
	for round := firstRound; ; round *= 2 {
		idx, cands = idx[:0], cands[:0]
		for ; i < len(d.order) && len(cands) < round; i++ {
			if i == self || !d.mayReceive(i) {
				continue
			}
			if known != nil && (known.nodes[i] || seen[i]) {
				if verify {
					d.sim.VerifyRejects("drain's rejecting targets", pod, d.order[i])
				}
				continue
			}
			idx, cands = append(idx, i), append(cands, d.order[i])
		}
		key := ""
		if pk.copy && len(cands) > 0 {
			if key = d.copies.Key(cands[0]); d.copies.Place(pod, pk.kind, key, cands[0]) != nil {
				return cands[0], nil
			}
		}
		to, placed, ferr := d.sim.PlaceOnAnyNode(pod, cands)
		if ferr == nil && key != "" && to == cands[0] {
			d.copies.Learn(placed, pk.kind, key, to)
		}
		for j, n := range cands {
			if n == to {
				break
			}
			if seen != nil {
				seen[idx[j]] = true
			}
		}
		if ferr == nil {
			return to, nil
		}
		maps.Copy(all.PerNode, ferr.PerNode)
		if len(ferr.PreFilter) > 0 || i >= len(d.order) {
			all.PreFilter = ferr.PreFilter
			return "", all
		}
	}
}

// firstRound is how many targets a pod is tried on at first.
const firstRound = 8

// readsLabels is true for pods whose own Filter verdicts depend on other
// pods' labels, which change on a target as pods move there: inter-pod
// affinity and topology spreading.
func readsLabels(pod *v1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return true
	}
	return len(pod.Spec.TopologySpreadConstraints) > 0
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

func leavesWithNode(pod *v1.Pod) bool {
	return drainability.IsMirrorPod(pod) || drainability.IsDaemonSetPod(pod)
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
