// Draining a candidate in the simulation: its pods placed again on the
// nodes that stay, as cheaply as the search over thousands of nodes
// needs.

package scaledown

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
)

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

func leavesWithNode(pod *v1.Pod) bool {
	return drainability.IsMirrorPod(pod) || drainability.IsDaemonSetPod(pod)
}
