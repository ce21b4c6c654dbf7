package scaleup

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
	v1 "k8s.io/api/core/v1"
)

// state is what the planner knows about node groups across loops.
type state struct {
	p        *Planner
	groups   []*nodegroup.NodeGroup
	byName   map[string]*nodegroup.NodeGroup
	current  map[string]int // live nodes per group
	planned  map[string]int // nodes added by this plan
	template map[string][]dynres.Entry
	// rejects holds, per group and kind of pod, why an empty node of the
	// group does not take the pod. It does not change between loops.
	rejects map[string]map[string]*placement.FitError
	// claimWhy holds, per group and kind, which request or constraint of
	// the pod's claims an empty node never satisfies ("" for none).
	claimWhy map[string]map[string]string
	kinds    *estimator.Kinds
	// held marks, per group and kind, pods kept from opening one of the
	// group's nodes because the node's devices would sit idle.
	held map[string]map[string]bool
	// plainGroups counts groups whose nodes offer no extended resources.
	plainGroups int
	// signature identifies groups whose new nodes are alike.
	signature map[string]string
	// takenIndexes are, per group, the n of live nodes already named
	// <group>-new-<n>, sorted, so that new nodes never clash with them.
	takenIndexes map[string][]int
	// namePrefix is, per group, what its new nodes' names start with (a
	// DNS label, nodegroup.NodeNamePrefixes).
	namePrefix map[string]string
	// namedMembers counts, per group, its live nodes named like new ones.
	namedMembers map[string]int
	// counted is what the nodes in the snapshot before the plan count
	// toward the cluster-wide limits; perNode what one new node of each
	// group adds (set only when a maximum is).
	counted limits.Amounts
	perNode map[string]limits.Amounts
	// stepCap caps, for one estimate, how many nodes a group may add (a
	// balanced group's share).
	stepCap map[string]int
	// templates are the new nodes estimates made, shared by all of them.
	templates *estimator.Templates
	// fullNodes are, per pod shape (noRoomShape), the nodes found plainly
	// full for it: a plan only adds pods, so they stay full.
	fullNodes map[string]map[string]bool
	// readingSignature memoizes signatureReading by group and labels kept.
	readingSignature map[string]string
	// alikeOutcomes are, per gang shape, the outcomes remembered per kind
	// of domain (alikeDomains); nodeLocal memoizes slicesNodeLocal.
	alikeOutcomes map[string]map[string]gangOutcome
	nodeLocal     *bool
}

func newState(p *Planner, groups []*nodegroup.NodeGroup) *state {
	st := &state{
		p: p, groups: groups,
		byName:       map[string]*nodegroup.NodeGroup{},
		current:      map[string]int{},
		planned:      map[string]int{},
		template:     map[string][]dynres.Entry{},
		rejects:      map[string]map[string]*placement.FitError{},
		claimWhy:     map[string]map[string]string{},
		held:         map[string]map[string]bool{},
		signature:    map[string]string{},
		takenIndexes: map[string][]int{},
		namedMembers: map[string]int{},
		templates:    &estimator.Templates{},
		fullNodes:    map[string]map[string]bool{},

		readingSignature: map[string]string{},
		alikeOutcomes:    map[string]map[string]gangOutcome{},
	}
	snap := p.Engine.Snapshot()
	if len(groups) == 0 {
		// Placing on existing nodes only (buffer pods, check-capacity):
		// nothing below is read, and a fleet's nodes need not be walked.
		return st
	}
	for _, name := range snap.NodeNames() {
		if g := nodegroup.Group(snap.NodeInfo(name).Node()); g != "" {
			st.current[g]++
		}
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.Name
	}
	st.namePrefix = nodegroup.NodeNamePrefixes(names)
	for _, g := range groups {
		st.takenIndexes[g.Name] = takenIndexes(snap.NodeNames(), st.namePrefix[g.Name])
	}
	// A group's live nodes already named <group>-new-<n> hold their index
	// in takenIndexes: they must not also push new names up as members.
	for _, name := range snap.NodeNames() {
		g := nodegroup.Group(snap.NodeInfo(name).Node())
		if p, ok := st.namePrefix[g]; ok && len(takenIndexes([]string{name}, p)) == 1 {
			st.namedMembers[g]++
		}
	}
	for _, g := range groups {
		st.byName[g.Name] = g
		st.rejects[g.Name] = map[string]*placement.FitError{}
		st.template[g.Name] = templateResources(p, g)
		st.held[g.Name] = map[string]bool{}
		st.signature[g.Name] = templateSignature(g)
		if len(st.template[g.Name]) == 0 {
			st.plainGroups++
		}
	}
	st.countLimits()
	return st
}

// templateResources instantiates the group's template on a fork to list
// what one of its nodes offers.
func templateResources(p *Planner, g *nodegroup.NodeGroup) []dynres.Entry {
	snap := p.Engine.Snapshot()
	snap.Fork()
	defer snap.Revert()
	name := "template-" + g.Name
	node, slices := g.NewNode(name)
	if err := snap.AddNode(node); err != nil {
		return nil
	}
	for _, s := range slices {
		if err := snap.AddResourceSlice(s); err != nil {
			return nil
		}
	}
	return p.Matcher.ForNode(snap, name)
}

// room is how many nodes the group may still add, within maxSize,
// --max-nodes-total and the cluster-wide resource maximums.
func (st *state) room(g *nodegroup.NodeGroup) int {
	room := st.sizeRoom(g)
	if room > 0 && st.perNode != nil {
		room, _ = limits.NodesWithin(st.left(), st.perNode[g.Name], room)
	}
	return room
}

// sizeRoom is the room within maxSize and --max-nodes-total only.
func (st *state) sizeRoom(g *nodegroup.NodeGroup) int {
	room := g.Spec.MaxSize - st.current[g.Name] - st.planned[g.Name]
	if st.p.MaxNodesTotal > 0 {
		total := st.p.Engine.Snapshot().NodeCount()
		room = min(room, st.p.MaxNodesTotal-total)
	}
	return room
}

// stepRoom is the room of one scale-up: also within
// --max-nodes-per-scaleup and a balanced share.
func (st *state) stepRoom(g *nodegroup.NodeGroup) int {
	room := st.room(g)
	if c := st.p.Limits.MaxNodesPerScaleUp; c > 0 {
		room = min(room, c)
	}
	if c, ok := st.stepCap[g.Name]; ok {
		room = min(room, c)
	}
	return room
}

func (st *state) binPacking(group string, final bool) *estimator.BinPacking {
	offset := st.current[group] - st.namedMembers[group] + st.planned[group]
	est := &estimator.BinPacking{Engine: st.p.Engine, CountOnly: !final, Kinds: st.kinds, DaemonSets: st.p.DaemonSets, Templates: st.templates, Namer: func(group string, i int) string {
		return newNodeName(st.namePrefix[group], offset+i, st.takenIndexes[group])
	}}
	// A node with devices is not opened for pods that use none while a
	// group without devices exists; such pods still use spare room on the
	// device nodes that other pods need.
	if len(st.template[group]) > 0 && st.plainGroups > 0 {
		est.NoNewNodeFor = usesNoDevices
	}
	return est
}

func (st *state) estimate(ctx context.Context, group string, pods []*v1.Pod, final bool) (*estimator.Result, error) {
	return st.estimateUnless(ctx, group, pods, final, nil)
}

// estimateUnless is estimate that stops once giveUp says the answer no
// longer matters (nil: never).
func (st *state) estimateUnless(ctx context.Context, group string, pods []*v1.Pod, final bool, giveUp func(*estimator.Result) bool) (*estimator.Result, error) {
	g := st.byName[group]
	st.p.estimates++
	est := st.binPacking(group, final)
	est.GiveUp = giveUp
	res, err := est.EstimateContext(ctx, g, pods, st.stepRoom(g))
	if err != nil {
		return nil, err
	}
	for _, u := range res.Unplaced {
		switch {
		case u.Err != nil:
			st.rejects[group][st.kinds.Of(u.Pod)] = u.Err
		case u.Held:
			st.held[group][st.kinds.Of(u.Pod)] = true
		}
	}
	return res, nil
}

func (st *state) describe() []GroupState {
	out := make([]GroupState, 0, len(st.groups))
	for _, g := range st.groups {
		out = append(out, GroupState{
			Name: g.Name, MinSize: g.Spec.MinSize, MaxSize: g.Spec.MaxSize,
			CurrentNodes: st.current[g.Name], NewNodes: st.planned[g.Name],
			Template: st.template[g.Name],
		})
	}
	return out
}

// usesNoDevices is true for pods with no extended resources and no claims.
func usesNoDevices(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return false
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for name := range c.Resources.Requests {
				if dynres.IsExtended(name) {
					return false
				}
			}
		}
	}
	return true
}

// templateSignature hashes what a new node of the group is: its template
// Node (labels, taints, capacity) and its ResourceSlices.
// signatureReading is the group's template signature with only the
// labels in read kept: groups alike but for labels the pods never read
// (a rack, a zone, an instance-type label) give the same estimate.
func (st *state) signatureReading(g *nodegroup.NodeGroup, read map[string]bool) string {
	kept := map[string]string{}
	for k, v := range g.Spec.Template.Labels {
		if read[k] {
			kept[k] = v
		}
	}
	return st.signatureWithLabels(g, kept)
}

// signatureWithLabels is the group's template signature with the
// template's labels replaced by kept.
func (st *state) signatureWithLabels(g *nodegroup.NodeGroup, kept map[string]string) string {
	memo := fmt.Sprint(g.Name, kept)
	if sig, ok := st.readingSignature[memo]; ok {
		return sig
	}
	c := *g
	c.Spec.Template.Labels = kept
	sig := templateSignature(&c)
	st.readingSignature[memo] = sig
	return sig
}

// labelsRead are the node label keys the pods' and DaemonSets' node
// selectors and affinities name. blind is false when a verdict may read
// other labels too: inter-pod terms or topology spreading (topology keys
// of any label), the profile's default spreading, or a pod selecting a
// node by name, or the profile's added node affinity.
func labelsRead(p *Planner, pods []*v1.Pod) (read map[string]bool, blind bool) {
	if !estimator.LabelBlind(p.Engine, pods) || estimator.SelectsNodesByName(pods) || p.Engine.AddsNodeAffinity() {
		return nil, false
	}
	for _, pod := range pods {
		if len(pod.Spec.TopologySpreadConstraints) > 0 {
			return nil, false
		}
	}
	return selectorKeys(p, pods), true
}

// selectorKeys are the node label keys the pods' and DaemonSets' node
// selectors and node affinities name.
func selectorKeys(p *Planner, pods []*v1.Pod) map[string]bool {
	read := map[string]bool{}
	add := func(spec *v1.PodSpec) {
		for k := range spec.NodeSelector {
			read[k] = true
		}
		if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
			na := a.NodeAffinity
			if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
				for _, t := range r.NodeSelectorTerms {
					addTerm(read, t)
				}
			}
			for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				addTerm(read, t.Preference)
			}
		}
	}
	for _, pod := range pods {
		add(&pod.Spec)
	}
	for _, ds := range p.DaemonSets {
		add(&ds.Spec.Template.Spec)
	}
	return read
}

func addTerm(read map[string]bool, t v1.NodeSelectorTerm) {
	for _, e := range t.MatchExpressions {
		read[e.Key] = true
	}
	for _, e := range t.MatchFields {
		read["field:"+e.Key] = true
	}
}

func templateSignature(g *nodegroup.NodeGroup) string {
	t := g.Spec.Template
	b, _ := json.Marshal([]any{t.Labels, t.Annotations, t.Spec.Taints, t.Status.Capacity, t.Status.Allocatable, g.Spec.ResourceSlices})
	h := fnv.New64a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%x", h.Sum64())
}

// copyVerdicts gives a group the per-pod verdicts of an alike group.
func (st *state) copyVerdicts(from, to string) {
	for k, v := range st.rejects[from] {
		st.rejects[to][k] = v
	}
	for k, v := range st.held[from] {
		st.held[to][k] = v
	}
}

// takenIndexes lists, sorted, the n of the nodes named <prefix>-new-<n>.
func takenIndexes(nodes []string, prefix string) []int {
	var out []int
	for _, name := range nodes {
		if rest, ok := strings.CutPrefix(name, prefix+"-new-"); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 && strconv.Itoa(n) == rest {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// newNodeName names the k-th new node of a group <prefix>-new-<n>, n being
// the k-th index no live node has: names are stable, never clash with a
// live node, and are k itself when nothing is taken.
func newNodeName(prefix string, k int, taken []int) string {
	n := k
	for _, t := range taken {
		if t <= n {
			n++
		}
	}
	return fmt.Sprintf("%s-new-%d", prefix, n)
}

// finalEstimate is the estimate the plan keeps. The number of nodes can
// depend on where the scheduler's scoring puts each pod, not on tight
// packing: the spreading default (least allocated) puts partition pods on
// different nodes, each blocking a whole GPU there, puts small device pods
// on different nodes before a larger claim comes, leaving no node with
// room for it, and leaves CPU and memory in pieces too small for a larger
// pod queued later. For a group whose devices are partitionable (they draw
// on shared counters), or whose pods are of several kinds, the packed
// count is then checked by placing the same pods, in the scheduler's queue
// order, onto that many fresh nodes with scoring, and raised until they
// all bind (within the group's room). Where the chosen option is already
// past the budget for groups that are not partitionable (scored false),
// the packed estimate is kept without a fork: a fork records an undo for
// every change, which thousands of placements make costly.
func (st *state) finalEstimate(ctx context.Context, group string, pods []*v1.Pod, scored bool) (*estimator.Result, error) {
	res, _, err := st.finalEstimateUnless(ctx, group, pods, scored, 0)
	return res, err
}

// finalEstimateUnless is finalEstimate that stops, reporting lost, once
// every count below loseAt leaves some pod out (0: no such count): the
// caller knows an option of loseAt nodes or more cannot be chosen.
func (st *state) finalEstimateUnless(ctx context.Context, group string, pods []*v1.Pod, scored bool, loseAt int) (*estimator.Result, bool, error) {
	g := st.byName[group]
	if !partitionable(g) && !scored {
		res, err := st.estimate(ctx, group, pods, true)
		return res, false, err
	}
	snap := st.p.Engine.Snapshot()
	snap.Fork()
	packed, err := st.estimate(ctx, group, pods, true)
	if err != nil {
		snap.Revert()
		return nil, false, err
	}
	if !partitionable(g) && !st.scoredCheckNeeded(packed) {
		snap.Commit()
		return packed, false, nil
	}
	snap.Revert()
	c := &countSearch{st: st, g: g, snap: snap, packed: packed, placed: SortSchedulerQueue(packed.PlacedOrder), room: st.stepRoom(g)}
	c.est = st.binPacking(group, true)
	// One Spread for every count: what the scheduler chose for a kind of
	// pod among classes of nodes holds at any count.
	c.spread = c.est.NewSpread(g, c.placed)
	return c.search(ctx, loseAt)
}

// countSearch raises the packed count of a group's new nodes until the
// pods, in the scheduler's queue order, all bind with its scoring.
type countSearch struct {
	st     *state
	g      *nodegroup.NodeGroup
	snap   *snapshot.Snapshot
	packed *estimator.Result
	placed []*v1.Pod
	room   int
	est    *estimator.BinPacking
	spread *estimator.Spread
}

// search finds a count at which every pod binds and one fewer leaves
// some out, from the packed count up (one less counts as too few), by
// doubling the step and halving back: a pass per step rather than one
// per node, since a scored pass costs pods times nodes. With loseAt > 0
// it stops, reporting lost, once every count below loseAt leaves a pod
// out.
func (c *countSearch) search(ctx context.Context, loseAt int) (*estimator.Result, bool, error) {
	short, n, step := len(c.packed.NewNodes)-1, len(c.packed.NewNodes), 1
	limit := c.room
	if loseAt > 0 {
		limit = min(c.room, loseAt-1)
	}
	for {
		res, all, err := c.place(ctx, n, n == short+1)
		if err != nil || res != nil {
			return res, false, err
		}
		if all {
			break
		}
		if loseAt > 0 && n >= loseAt-1 {
			return nil, true, nil
		}
		short, n, step = n, min(n+step, limit), step*2
	}
	enough := n
	for enough-short > 1 {
		mid := short + (enough-short)/2
		res, all, err := c.place(ctx, mid, mid == short+1)
		if err != nil || res != nil {
			return res, false, err
		}
		if all {
			enough = mid
		} else {
			short = mid
		}
	}
	res, _, err := c.place(ctx, enough, true)
	if err == nil && res == nil {
		err = fmt.Errorf("node group %s: placing %d pods on %d new nodes bound them all once and not again", c.g.Name, len(c.placed), enough)
	}
	return res, false, err
}

// place places the pods on n fresh nodes and keeps the result only when
// asked to and every pod bound (or the room is used up).
func (c *countSearch) place(ctx context.Context, n int, keepIfAll bool) (*estimator.Result, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	c.snap.Fork()
	var res *estimator.Result
	var all bool
	var err error
	if c.st.p.exhaustiveScored {
		res, all, err = c.est.Scored(c.g, c.placed, n)
	} else {
		res, all, err = c.spread.Place(n)
	}
	if err != nil {
		c.snap.Revert()
		return nil, false, err
	}
	if (all && keepIfAll) || (!all && n >= c.room) {
		c.snap.Commit()
		res.Unplaced = append(res.Unplaced, c.packed.Unplaced...)
		return res, all, nil
	}
	c.snap.Revert()
	return nil, all, nil
}

// scoredCheckBudget bounds, for groups that are not partitionable, the
// placements (pods times nodes) one scored pass may take: scoring every
// pod against every new node grows with both, and a plan of thousands of
// nodes of mixed pods keeps the packed count (as the Cluster
// Autoscaler's estimator does) instead of taking minutes.
const scoredCheckBudget = 50_000

// scoredCheckNeeded reports whether pods of more than one kind were
// packed onto the group's new nodes (within the budget): only then can the
// scheduler's spreading leave devices, CPU or memory too scattered for a
// later pod. Pods of one kind fill identical nodes alike in any order.
func (st *state) scoredCheckNeeded(packed *estimator.Result) bool {
	return len(packed.PlacedOrder)*len(packed.NewNodes) <= scoredCheckBudget && st.severalKinds(packed.PlacedOrder)
}

// withinScoredBudget: the option's packed pods times nodes are within the
// scored check's budget.
func withinScoredBudget(o expander.Option) bool {
	return o.NewNodes*o.PodCount <= scoredCheckBudget
}

// severalKinds reports whether the pods are of more than one kind.
func (st *state) severalKinds(pods []*v1.Pod) bool {
	for _, pod := range pods[min(1, len(pods)):] {
		if st.kinds.Of(pod) != st.kinds.Of(pods[0]) {
			return true
		}
	}
	return false
}

// partitionable reports whether the group's devices draw on shared
// counters (a GPU offered whole and as partitions).
func partitionable(g *nodegroup.NodeGroup) bool {
	for _, s := range g.Spec.ResourceSlices {
		if len(s.SharedCounters) > 0 {
			return true
		}
	}
	return false
}
