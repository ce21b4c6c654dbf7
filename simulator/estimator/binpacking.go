// Package estimator answers "how many new nodes of this group do these
// pods need?" by placing them, through the placement engine, onto template
// nodes added to a (forked) snapshot. Every placement commits the devices
// the pod takes, so the next pod sees them as taken: DRA-backed extended
// resources are counted exactly.
package estimator

import (
	"context"
	"fmt"
	"math"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"draxr.dev/draxr/simulator/daemonsets"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// Result is what an estimate added and placed. The snapshot holds the new
// nodes and placements until the caller reverts its fork.
type Result struct {
	Group    string
	NewNodes []string
	// Placed maps pod UID to the new node it went to, in placement order.
	Placed      map[types.UID]string
	PlacedOrder []*v1.Pod
	// Unplaced are the pods left over, with why an empty node of the group
	// does not take them (nil FitError: the node limit was reached first).
	Unplaced []Unplaced
	// Counted are the CountOnly nodes, which are not in the snapshot.
	Counted []CountedNode
	// Abandoned is set when GiveUp stopped the estimate part-way: the
	// pods after the last one placed were not tried.
	Abandoned bool
}

// CountedNode is a CountOnly node: a copy of Source holding Pods pods of
// one kind, each using PerPod.
type CountedNode struct {
	Name, Source string
	Pods         int
	PerPod       Usage
}

// Usage is what pods take of a node.
type Usage struct {
	MilliCPU, Memory, Devices float64
}

// Unplaced is a pod the estimate could not place.
type Unplaced struct {
	Pod *v1.Pod
	// Err is why an empty node of the group rejects the pod; nil when the
	// pod would fit but the node limit was reached, or was not tried (Held).
	Err *placement.FitError
	// Held is true when NoNewNodeFor kept the pod from opening a node.
	Held bool
}

// NodeNamer names the i-th new node of a group (0-based).
type NodeNamer func(group string, i int) string

// BinPacking places pods in the given order: first on the earliest new
// node not yet known to be full for that kind of pod, then on a new node
// while maxNodes allows.
//
// Once a fresh node has been filled by pods of one kind alone, the number
// of such pods a fresh node takes is known. A later run of that many pods
// of the kind onto a fresh node is then copied from the first node
// (placement.Replicate: same devices, this node's name) instead of being
// scheduled pod by pod; the result is the same, at a fraction of the cost.
type BinPacking struct {
	Engine *placement.Engine
	Namer  NodeNamer
	// Kinds caches equivalence keys across estimates; nil computes them.
	Kinds *Kinds
	// NoNewNodeFor, when set, names pods that may use room on the new
	// nodes but may not have a node opened for them.
	NoNewNodeFor func(*v1.Pod) bool
	// CountOnly trades placements for speed when only the node and pod
	// counts matter (comparing node groups): once a fresh node has been
	// filled by pods of one kind alone, later fresh nodes for a run of
	// that kind are counted as holding the same number of pods without
	// being simulated. Those nodes are not added to the snapshot, so pods
	// of other kinds cannot use their leftover room; the final plan is
	// always made with CountOnly off.
	CountOnly bool
	// DaemonSets run their pods on every new node that matches them, as
	// on a real node: those pods take room before any pending pod.
	DaemonSets []*appsv1.DaemonSet
	// Templates, when set, keeps the new nodes made, for estimates that
	// add them again after a Revert.
	Templates *Templates
	// GiveUp, when set, is asked each time the estimate has opened more
	// nodes; true stops it (Result.Abandoned): its caller can tell the
	// answer no longer matters (it cannot beat one it has).
	GiveUp func(*Result) bool
}

// Templates keeps each new node and its ResourceSlices as the group's
// NewNode made them, by group and name. Estimates of one plan add the same
// new nodes again and again (each count the scored check tries, each
// loop's comparison of groups), and deep-copying a node's devices (208
// with attributes and counters on a DynamicMIG H100) costs more than
// placing its pods. The snapshot never changes the objects it is given,
// so one copy serves every fork that adds the node.
type Templates struct {
	m map[[2]string]templateNode
	// models holds each group's first new node, which later ones share
	// their spec and status with (NewNodeLike).
	models map[string]*v1.Node
}

type templateNode struct {
	node   *v1.Node
	slices []*resourceapi.ResourceSlice
}

// newNode is g.NewNode(name), made once per group and name when t is set.
func (t *Templates) newNode(g *nodegroup.NodeGroup, name string) (*v1.Node, []*resourceapi.ResourceSlice) {
	if t == nil {
		return g.NewNode(name)
	}
	key := [2]string{g.Name, name}
	if n, ok := t.m[key]; ok {
		return n.node, n.slices
	}
	var node *v1.Node
	var slices []*resourceapi.ResourceSlice
	if model, ok := t.models[g.Name]; ok {
		node, slices = g.NewNodeLike(model, name)
	} else {
		node, slices = g.NewNode(name)
	}
	if t.m == nil {
		t.m, t.models = map[[2]string]templateNode{}, map[string]*v1.Node{}
	}
	if _, ok := t.models[g.Name]; !ok {
		t.models[g.Name] = node
	}
	t.m[key] = templateNode{node: node, slices: slices}
	return node, slices
}

// Estimate mutates the placement engine's snapshot; callers Fork before and Revert
// or Commit after.
func (b *BinPacking) Estimate(g *nodegroup.NodeGroup, pods []*v1.Pod, maxNodes int) (*Result, error) {
	return b.EstimateContext(context.Background(), g, pods, maxNodes)
}

// EstimateContext is Estimate that stops with ctx's error once ctx ends,
// checked before each pod: one estimate of thousands of pods takes
// seconds, and an interrupted `draxr simulate` must stop within one.
func (b *BinPacking) EstimateContext(ctx context.Context, g *nodegroup.NodeGroup, pods []*v1.Pod, maxNodes int) (*Result, error) {
	r := &run{b: b, g: g, snap: b.Engine.Snapshot(), kinds: b.Kinds,
		// Sized for every pod placed: growing a map of thousands of pods
		// allocates twice what it ends up holding.
		res:    &Result{Group: g.Name, Placed: make(map[types.UID]string, len(pods)), PlacedOrder: make([]*v1.Pod, 0, len(pods))},
		cursor: map[string]int{}, index: map[string]int{}, rejects: map[string]*placement.FitError{},
		fill: fillMemo{noReplicate: map[string]bool{}}, noFitCopy: map[string]map[string]int{}, filling: map[string]*countedNode{}}
	if r.kinds == nil {
		r.kinds = &Kinds{}
	}
	r.kindOf = r.kinds.Of
	if b.labelBlind(pods) {
		r.kindOf = r.kinds.Alike
	}
	opened := 0
	for i := 0; i < len(pods); i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if b.GiveUp != nil && len(r.res.NewNodes) > opened {
			opened = len(r.res.NewNodes)
			if b.GiveUp(r.res) {
				r.res.Abandoned = true
				break
			}
		}
		n, err := r.place(pods, i, maxNodes)
		if err != nil {
			return nil, err
		}
		i += n - 1
	}
	for _, c := range r.counted {
		if !c.materialized {
			r.res.Counted = append(r.res.Counted, CountedNode{Name: c.name, Source: c.src.node, Pods: len(c.pods), PerPod: c.src.perPod})
		}
	}
	return r.res, nil
}

// run is one estimate's state.
type run struct {
	b     *BinPacking
	g     *nodegroup.NodeGroup
	snap  *snapshot.Snapshot
	kinds *Kinds
	// kindOf is the key pods share cursors, verdicts and fill patterns by:
	// Kinds.Of, or Kinds.Alike when labels cannot matter (labelBlind).
	kindOf func(*v1.Pod) string
	res    *Result
	// Nodes only fill up, so a node that rejected a kind of pod keeps
	// rejecting it: each kind keeps a cursor into simulated.
	cursor    map[string]int
	simulated []string              // new nodes that exist in the snapshot
	infos     []*framework.NodeInfo // their NodeInfos, by position: read for every pod, a lookup by name each costs most of a scan
	index     map[string]int        // position in simulated
	blocks    []roomBlock           // by position in simulated / roomBlockSize
	roomBuf   []string              // a roomScan's block, reused
	rejects   map[string]*placement.FitError
	fill      fillMemo
	// counted are CountOnly nodes; they are materialized (replicated into
	// the snapshot) when a pod of another kind needs their spare room.
	counted []*countedNode
	filling map[string]*countedNode // kind -> its latest counted node
	// noFitCopy maps kind -> source node -> the fewest pods a copy of that
	// node held when it rejected the kind. Copies hold prefixes of the
	// source's pods, so a copy holding at least as many rejects it too; the
	// last copy of a run may hold fewer and still have room.
	noFitCopy map[string]map[string]int
}

type countedNode struct {
	name string
	src  filled
	// srcKind is the kind of the source's first pod, looked up once: every
	// pod that finds no room scans all counted nodes.
	srcKind      string
	pods         []*v1.Pod
	materialized bool
}

// place places pods[i] (and, when it replicates a filled node, the run of
// pods after it) and returns how many pods it consumed.
func (r *run) place(pods []*v1.Pod, i, maxNodes int) (int, error) {
	pod := pods[i]
	kind := r.kindOf(pod)
	if ferr, ok := r.rejects[kind]; ok {
		r.res.Unplaced = append(r.res.Unplaced, Unplaced{Pod: pod, Err: ferr})
		return 1, nil
	}
	if c := r.openCounted(kind); c != nil {
		c.pods = append(c.pods, pod)
		r.record(pod, c.name)
		return 1, nil
	}
	if node, err := r.onExisting(pod, kind); err != nil || node != "" {
		return 1, err
	}
	if r.b.NoNewNodeFor != nil && r.b.NoNewNodeFor(pod) {
		r.res.Unplaced = append(r.res.Unplaced, Unplaced{Pod: pod, Held: true})
		return 1, nil
	}
	if len(r.res.NewNodes) >= maxNodes {
		r.res.Unplaced = append(r.res.Unplaced, Unplaced{Pod: pod})
		return 1, nil
	}
	if m, ok := r.fill.perNode[kind]; ok {
		if r.b.CountOnly {
			c := &countedNode{name: r.b.Namer(r.g.Name, len(r.res.NewNodes)), src: m, srcKind: r.kindOf(m.pods[0]), pods: []*v1.Pod{pod}}
			r.counted = append(r.counted, c)
			r.filling[kind] = c
			r.res.NewNodes = append(r.res.NewNodes, c.name)
			r.record(pod, c.name)
			return 1, nil
		}
		if r.fill.runOf(pods[i:], kind, m.n, r.kindOf, r.kinds.OwnsNamedClaims) {
			if r.b.replicate(r.g, m, pods[i:i+m.n], r.res) {
				r.addSimulated(r.res.NewNodes[len(r.res.NewNodes)-1])
				r.cursor[kind] = len(r.simulated) // the copy is as full as its source
				return m.n, nil
			}
			r.fill.noReplicate[kind] = true
		}
	}
	return 1, r.openNode(pod, kind)
}

// openCounted returns the CountOnly node still filling with this kind. It
// need not be the last one opened: with kinds interleaved, nodes of other
// kinds may have been opened since.
func (r *run) openCounted(kind string) *countedNode {
	c := r.filling[kind]
	if c == nil || c.materialized || len(c.pods) >= c.src.n {
		return nil
	}
	return c
}

// onExisting tries the new nodes: simulated ones from the kind's cursor,
// then counted ones, materialized one at a time.
func (r *run) onExisting(pod *v1.Pod, kind string) (string, error) {
	if node := r.firstFit(pod, kind); node != "" {
		return node, nil
	}
	for _, c := range r.counted {
		// Copies of a node filled by this kind are full for it.
		if c.materialized || c.srcKind == kind {
			continue
		}
		if n, ok := r.noFitCopy[kind][c.src.node]; ok && len(c.pods) >= n {
			continue
		}
		if err := r.materialize(c); err != nil {
			return "", err
		}
		j := len(r.simulated) - 1
		if _, _, ferr := r.b.Engine.PlaceOnFirstFitting(pod, r.simulated[j:]); ferr == nil {
			r.fill.placed(c.name, kind)
			r.record(pod, c.name)
			return c.name, nil
		}
		r.cursor[kind] = len(r.simulated)
		if r.noFitCopy[kind] == nil {
			r.noFitCopy[kind] = map[string]int{}
		}
		if n, ok := r.noFitCopy[kind][c.src.node]; !ok || len(c.pods) < n {
			r.noFitCopy[kind][c.src.node] = len(c.pods)
		}
	}
	return "", nil
}

// firstFit places the pod on the first simulated node from the kind's
// cursor that takes it, or returns "". Nodes before that one rejected the
// kind and stay full for it. One PreFilter serves all candidates, and
// nodes NoRoom rules out are not filtered at all: with many kinds (every
// pod its own kind, at worst) a scan of every new node per pod would
// otherwise cost a scheduling cycle per node.
func (r *run) firstFit(pod *v1.Pod, kind string) string {
	from := r.cursor[kind]
	if from >= len(r.simulated) {
		return ""
	}
	node := ""
	if noRoom := r.b.Engine.NoRoom(pod); noRoom == nil {
		node, _, _ = r.b.Engine.PlaceOnFirstFitting(pod, r.simulated[from:])
	} else if scan := r.roomScan(pod, from, noRoom); scan.next() {
		// The scope is every node from the cursor: the nodes with room are
		// found only as the first fit reaches them.
		node, _, _ = r.b.Engine.PlaceOnFirstFittingOf(pod, r.simulated[from:], scan.nodes)
	}
	// Every node from the cursor to the one taken rejected the kind. Of
	// those, only nodes holding the kind can teach the fill memo: with
	// every pod its own kind, walking them all costs a pass over the new
	// nodes per pod.
	end := len(r.simulated)
	if node != "" {
		end = r.index[node]
	}
	r.fill.fullBetween(r.b.Engine, kind, r.index, from, end)
	if end > from {
		r.cursor[kind] = end
	}
	if node != "" {
		r.fill.placed(node, kind)
		r.record(pod, node)
	}
	return node
}

// roomScan walks the simulated nodes from a position, yielding those
// NoRoom does not rule out, a block at a time as the first fit reaches
// them. Whole blocks of nodes none of which has the CPU, memory or a pod
// slot the pod needs are skipped unread: with thousands of new nodes and
// every pod its own kind, asking each node for each pod costs the square
// of their number, and reading blocks past the node taken is wasted.
type roomScan struct {
	r        *run
	pod      *v1.Pod
	noRoom   func(string) bool
	cpu, mem int64 // RoomNeeded: what NoRoom asks first
	from     int
	start    int      // the next block's first position
	found    []string // the block read last: its nodes with room
	taken    int      // how many of found were yielded
}

// roomScan starts a scan for a pod NoRoom applies to (RoomNeeded then
// knows its CPU and memory).
func (r *run) roomScan(pod *v1.Pod, from int, noRoom func(string) bool) *roomScan {
	cpu, mem, _ := r.b.Engine.RoomNeeded(pod)
	return &roomScan{r: r, pod: pod, noRoom: noRoom, cpu: cpu, mem: mem, from: from,
		start: from - from%roomBlockSize, found: r.roomBuf[:0]}
}

// next reads blocks until one has a node with room and reports whether
// a node is left to yield.
func (s *roomScan) next() bool {
	r := s.r
	if s.taken == len(s.found) {
		s.found, s.taken = s.found[:0], 0
	}
	for len(s.found) == 0 && s.start < len(r.simulated) {
		start := s.start
		end := min(start+roomBlockSize, len(r.simulated))
		s.start = end
		b := start / roomBlockSize
		for len(r.blocks) <= b {
			r.blocks = append(r.blocks, roomBlock{})
		}
		blk := &r.blocks[b]
		if blk.nodes == end-start && blk.short(s.cpu, s.mem) {
			s.verifySkipped(start, end)
			continue
		}
		// Read the block afresh while asking its nodes: what filled up
		// since, and nodes added to it.
		fresh := roomBlock{cpu: math.MinInt64, mem: math.MinInt64, slots: math.MinInt64, nodes: end - start}
		for j := start; j < end; j++ {
			free := freeOn(r.infos[j])
			fresh.merge(free)
			if j < s.from {
				continue
			}
			if free.short(s.cpu, s.mem) {
				s.verifySkipped(j, j+1)
				continue
			}
			if !s.noRoom(r.simulated[j]) {
				s.found = append(s.found, r.simulated[j])
			}
		}
		*blk = fresh
	}
	return s.taken < len(s.found)
}

// nodes yields the nodes with room in position order, reading blocks
// only as far as the caller takes them.
func (s *roomScan) nodes(yield func(string) bool) {
	defer func() { s.r.roomBuf = s.found[:0] }()
	for s.next() {
		n := s.found[s.taken]
		s.taken++
		if !yield(n) {
			return
		}
	}
}

// verifySkipped holds a skipped block to NoRoom under the verify switch.
func (s *roomScan) verifySkipped(start, end int) {
	r := s.r
	if !r.b.Engine.VerifiesShortcuts() {
		return
	}
	for _, n := range r.simulated[max(start, s.from):end] {
		if !s.noRoom(n) {
			placement.ShortcutDiffers("room blocks", "node %s was skipped for pod %s/%s, which NoRoom does not rule it out for", n, s.pod.Namespace, s.pod.Name)
		}
	}
}

// roomBlockSize is how many new nodes share a most-free summary.
const roomBlockSize = 32

// roomBlock is the most any of a block's nodes had free when it was read:
// nodes only fill up during an estimate, so it never says less than
// there is.
type roomBlock struct {
	cpu, mem, slots int64
	nodes           int // how many of the block's nodes it covers
}

// short says whether no node of the block has cpu and mem free with a
// pod slot.
func (blk *roomBlock) short(cpu, mem int64) bool {
	return blk.slots < 1 || cpu > 0 && blk.cpu < cpu || mem > 0 && blk.mem < mem
}

// freeOn is what one node has free, as a block of one: a node short of a
// pod's CPU, memory or a pod slot is one NoRoom rules out, and is passed
// over without looking it up by name.
func freeOn(ni *framework.NodeInfo) roomBlock {
	if ni == nil {
		return roomBlock{cpu: math.MaxInt64, mem: math.MaxInt64, slots: math.MaxInt64, nodes: 1} // unknown: never skipped
	}
	a, u := ni.Allocatable, ni.Requested
	return roomBlock{cpu: a.MilliCPU - u.MilliCPU, mem: a.Memory - u.Memory, slots: int64(a.AllowedPodNumber - len(ni.Pods)), nodes: 1}
}

// merge takes in the room of another node of the block.
func (blk *roomBlock) merge(o roomBlock) {
	blk.cpu, blk.mem, blk.slots = max(blk.cpu, o.cpu), max(blk.mem, o.mem), max(blk.slots, o.slots)
}

func (r *run) addSimulated(name string) {
	r.index[name] = len(r.simulated)
	r.simulated = append(r.simulated, name)
	r.infos = append(r.infos, r.snap.NodeInfo(name))
}

// materialize replicates a counted node's pods into the snapshot.
func (r *run) materialize(c *countedNode) error {
	if err := r.b.addNode(r.g, c.name); err != nil {
		return err
	}
	if err := r.b.Engine.Replicate(c.src.node, c.src.pods[:len(c.pods)], c.name, c.pods); err != nil {
		return fmt.Errorf("node group %s: %w", r.g.Name, err)
	}
	c.materialized = true
	r.addSimulated(c.name)
	for _, p := range c.pods {
		r.fill.placed(c.name, r.kindOf(p))
	}
	return nil
}

// openNode adds a fresh node for the pod, or learns that an empty node of
// the group rejects its kind.
func (r *run) openNode(pod *v1.Pod, kind string) error {
	name := r.b.Namer(r.g.Name, len(r.res.NewNodes))
	r.snap.Fork()
	if err := r.b.addNode(r.g, name); err != nil {
		r.snap.Revert()
		return err
	}
	if _, _, ferr := r.b.Engine.PlaceOnAnyNode(pod, []string{name}); ferr != nil {
		r.snap.Revert()
		r.rejects[kind] = ferr
		r.res.Unplaced = append(r.res.Unplaced, Unplaced{Pod: pod, Err: ferr})
		return nil
	}
	r.snap.Commit()
	r.res.NewNodes = append(r.res.NewNodes, name)
	r.addSimulated(name)
	r.fill.placed(name, kind)
	r.record(pod, name)
	return nil
}

func (r *run) record(pod *v1.Pod, node string) {
	r.res.Placed[pod.UID] = node
	r.res.PlacedOrder = append(r.res.PlacedOrder, pod)
}

// replicate adds a fresh node holding a copy of the memo's placements for
// run; false (and nothing added) when the placements cannot be copied.
func (b *BinPacking) replicate(g *nodegroup.NodeGroup, m filled, run []*v1.Pod, res *Result) bool {
	snap := b.Engine.Snapshot()
	name := b.Namer(g.Name, len(res.NewNodes))
	snap.Fork()
	if err := b.addNode(g, name); err != nil {
		snap.Revert()
		return false
	}
	if err := b.Engine.Replicate(m.node, m.pods, name, run); err != nil {
		snap.Revert()
		return false
	}
	snap.Commit()
	res.NewNodes = append(res.NewNodes, name)
	for _, p := range run {
		res.Placed[p.UID] = name
		res.PlacedOrder = append(res.PlacedOrder, p)
	}
	return true
}

// labelBlind reports whether pod labels and owners cannot change a Filter
// verdict in this estimate, so that pods alike but for them may share one
// fill pattern (100 ReplicaSets of one shape fill one template node, not
// 100): no pod placed or pending has inter-pod (anti-)affinity, and the
// profile adds no hard default spread constraints. Scoring, which default
// spreading does read, is not used here.
func (b *BinPacking) labelBlind(pods []*v1.Pod) bool { return LabelBlind(b.Engine, pods) }

// LabelBlind reports whether no Filter verdict for these pods reads pod
// labels: no pod placed in h's snapshot or among pods has inter-pod
// (anti-)affinity, and the profile adds no hard default spread
// constraints.
func LabelBlind(sim *placement.Engine, pods []*v1.Pod) bool {
	if sim.SpreadsByDefault() {
		return false
	}
	lister := sim.Snapshot().NodeInfos()
	if withAffinity, err := lister.HavePodsWithAffinityList(); err != nil || len(withAffinity) > 0 {
		return false
	}
	if withAnti, err := lister.HavePodsWithRequiredAntiAffinityList(); err != nil || len(withAnti) > 0 {
		return false
	}
	for _, p := range pods {
		if a := p.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
			return false
		}
	}
	return true
}

// addNode adds a fresh node of the group with its ResourceSlices and the
// DaemonSet pods that would run there. A DaemonSet pod that does not fit
// the node is left out, as its controller's pod would stay pending.
func (b *BinPacking) addNode(g *nodegroup.NodeGroup, name string) error {
	snap := b.Engine.Snapshot()
	node, slices := b.Templates.newNode(g, name)
	if err := snap.AddNode(node); err != nil {
		return fmt.Errorf("node group %s: %w", g.Name, err)
	}
	for _, s := range slices {
		if err := snap.AddResourceSlice(s); err != nil {
			return fmt.Errorf("node group %s: %w", g.Name, err)
		}
	}
	for _, pod := range daemonsets.PodsFor(klog.Background(), node, b.DaemonSets) {
		_, _ = b.Engine.Place(pod, name)
	}
	return nil
}

// fillMemo learns how many pods of one kind fill a fresh node, from nodes
// that held only that kind when they first rejected it, and keeps those
// pods as the pattern to replicate.
type fillMemo struct {
	perNode     map[string]filled
	onNode      map[string]map[string]int // node -> kind -> pods
	nodesOf     map[string][]string       // kind -> nodes holding it
	noReplicate map[string]bool           // kinds whose placements could not be copied
}

type filled struct {
	n      int
	node   string
	pods   []*v1.Pod // as placed, in placement order
	perPod Usage
}

func (f *fillMemo) placed(node, kind string) {
	if f.onNode == nil {
		f.onNode = map[string]map[string]int{}
	}
	if f.onNode[node] == nil {
		f.onNode[node] = map[string]int{}
	}
	if f.onNode[node][kind] == 0 {
		if f.nodesOf == nil {
			f.nodesOf = map[string][]string{}
		}
		f.nodesOf[kind] = append(f.nodesOf[kind], node)
	}
	f.onNode[node][kind]++
}

// fullBetween is full for each node holding the kind whose position is
// in [from, end), in position order.
func (f *fillMemo) fullBetween(sim *placement.Engine, kind string, index map[string]int, from, end int) {
	var between []string
	for _, n := range f.nodesOf[kind] {
		if j, ok := index[n]; ok && j >= from && j < end {
			between = append(between, n)
		}
	}
	slices.SortFunc(between, func(a, b string) int { return index[a] - index[b] })
	for _, n := range between {
		f.full(sim, n, kind)
	}
}

func (f *fillMemo) full(sim *placement.Engine, node, kind string) {
	kinds := f.onNode[node]
	if len(kinds) != 1 || kinds[kind] == 0 {
		return
	}
	if _, known := f.perNode[kind]; known || f.noReplicate[kind] {
		return
	}
	snap := sim.Snapshot()
	m := filled{n: kinds[kind], node: node}
	for _, p := range snap.NodeInfo(node).Pods {
		// Every fresh node gets its own DaemonSet pods first.
		if daemonsets.IsDaemonSetPod(p.GetPod()) {
			continue
		}
		if !sim.OnOwnPools(p.GetPod(), node) {
			// Devices of a shared pool: the next node fills differently.
			f.noReplicate[kind] = true
			return
		}
		m.pods = append(m.pods, p.GetPod())
	}
	if f.perNode == nil {
		f.perNode = map[string]filled{}
	}
	used := NodeUsage(snap, node)
	n := float64(m.n)
	m.perPod = Usage{MilliCPU: used.Requested.MilliCPU / n, Memory: used.Requested.Memory / n, Devices: used.Requested.Devices / n}
	f.perNode[kind] = m
}

// runOf reports whether the next n pods are all of the kind and may be
// replicated.
func (f *fillMemo) runOf(pods []*v1.Pod, kind string, n int, kindOf func(*v1.Pod) string, ownNamed func(*v1.Pod) bool) bool {
	if len(pods) < n || f.noReplicate[kind] {
		return false
	}
	for _, p := range pods[:n] {
		if kindOf(p) != kind || !placement.Replicable(p, ownNamed(p)) {
			return false
		}
	}
	return true
}
