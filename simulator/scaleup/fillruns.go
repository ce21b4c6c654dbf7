package scaleup

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/placement"
)

// fillRun is what first fit learned filling an empty existing node with
// pods of one kind: the pods it took, in order, until it was plainly full
// for the kind. Buffers' pods (hundreds alike) fill empty nodes this way
// every loop; once one node is learned, an identical empty node takes the
// same pods the same way, and Replicate copies the placements instead of
// running the plugins for each pod (docs/shortcuts.md).
type fillRun struct {
	src  string
	sig  uint64
	pods []*v1.Pod // as placed
	full bool      // src was plainly full for the kind after the last pod
	dead bool      // another kind landed on src: nothing learned
}

// fillRuns are the runs of a placeOnExisting pass, by kind: pods alike
// (estimator.Kinds.Alike, owner and labels aside) share a run, since no
// pod's Filter verdict reads labels in a pass where runs are kept.
type fillRuns struct {
	engine *placement.Engine
	kinds  *estimator.Kinds
	// on: no pod placed or pending reads labels (estimator.LabelBlind);
	// otherwise an identical node may still differ by its neighbours.
	on     bool
	byKind map[string]*fillRun
	onNode map[string]string // node -> kind of its run
}

func newFillRuns(engine *placement.Engine, kinds *estimator.Kinds, pending []*v1.Pod, off bool) *fillRuns {
	return &fillRuns{engine: engine, kinds: kinds, on: !off && estimator.LabelBlind(engine, pending), byKind: map[string]*fillRun{}, onNode: map[string]string{}}
}

// placed learns from a pod first fit placed on node; full tells whether
// the node is now plainly full for the pod's kind.
func (f *fillRuns) placed(node string, placed *v1.Pod, full func(string) bool) {
	if !f.on {
		return
	}
	kind := f.kinds.Alike(placed)
	if k, ok := f.onNode[node]; ok && k != kind {
		if r := f.byKind[k]; r != nil && r.src == node {
			r.dead = true
		}
	}
	r := f.byKind[kind]
	if r == nil || r.src != node || r.dead || r.full {
		if r != nil && !r.dead && r.full && r.src != node {
			return // learned already; a copy was not possible here
		}
		r = nil
		// A run starts on a node that was empty: the pod is its only one
		// and holds devices of the node's own pool only.
		if ni := f.engine.Snapshot().NodeInfo(node); ni != nil && len(ni.Pods) == 1 && f.engine.OnOwnPools(placed, node) &&
			placement.Replicable(placed, f.kinds.OwnsNamedClaims(placed)) && !estimator.SelectsNodesByName([]*v1.Pod{placed}) {
			if sig, ok := f.signatureWithout(node, placed); ok {
				r = &fillRun{src: node, sig: sig}
				f.byKind[kind] = r
				f.onNode[node] = kind
			}
		}
		if r == nil {
			return
		}
	}
	if !f.engine.OnOwnPools(placed, node) {
		r.dead = true
		return
	}
	r.pods = append(r.pods, placed)
	r.full = full != nil && full(node)
}

// signatureWithout is the node's signature as it was before pod came.
func (f *fillRuns) signatureWithout(node string, pod *v1.Pod) (uint64, bool) {
	snap := f.engine.Snapshot()
	snap.Fork()
	defer snap.Revert()
	if _, err := f.engine.Remove(pod.UID); err != nil {
		return 0, false
	}
	return f.engine.EmptyNodeSignature(node)
}

// copyTo places the next pods of the kind by copying its learned run onto
// the node first fit would try next, when that node is empty and identical
// to the run's. It returns the placed pods (the run's length), or nil when
// no copy applies.
func (f *fillRuns) copyTo(next []*v1.Pod, nodes []string, last string, full func(string) bool) (string, []*v1.Pod) {
	if !f.on {
		return "", nil
	}
	kind := f.kinds.Alike(next[0])
	r := f.byKind[kind]
	if r == nil || r.dead || !r.full || len(next) < len(r.pods) {
		return "", nil
	}
	run := next[:len(r.pods)]
	for _, p := range run {
		if f.kinds.Alike(p) != kind || !placement.Replicable(p, f.kinds.OwnsNamedClaims(p)) {
			return "", nil
		}
	}
	if estimator.SelectsNodesByName(run) {
		return "", nil
	}
	// The node first fit would try: the first from last on not plainly
	// full. An identical empty node takes the run as the source did.
	start := max(slices.Index(nodes, last), 0)
	dst := ""
	for i := range nodes {
		n := nodes[(start+i)%len(nodes)]
		if full == nil || !full(n) {
			dst = n
			break
		}
	}
	if dst == "" || dst == r.src {
		return "", nil
	}
	if sig, ok := f.engine.EmptyNodeSignature(dst); !ok || sig != r.sig {
		return "", nil
	}
	if err := f.engine.Replicate(r.src, r.pods, dst, run); err != nil {
		return "", nil
	}
	// First fit moves on from dst as it did from the source only if dst
	// is as full (NoRoom holds itself to the full path).
	if f.engine.VerifiesShortcuts() && !full(dst) {
		placement.ShortcutDiffers("fill copies", "node %s took the %d pods node %s took but is not full for them", dst, len(run), r.src)
	}
	placed := make([]*v1.Pod, len(run))
	for i, p := range run {
		placed[i], _, _ = f.engine.Snapshot().Pod(p.UID)
	}
	return dst, placed
}
