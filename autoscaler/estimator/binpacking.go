// Package estimator answers "how many new nodes of this group do these
// pods need?" by placing them, through the scheduler harness, onto template
// nodes added to a (forked) snapshot. Every placement commits the devices
// the pod takes, so the next pod sees them as taken: DRA-backed extended
// resources are counted exactly.
package estimator

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"draxr.dev/draxr/cloudprovider/nodegroup"
	"draxr.dev/draxr/simulator/harness"
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
	Err *harness.FitError
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
// (harness.Replicate: same devices, this node's name) instead of being
// scheduled pod by pod; the result is the same, at a fraction of the cost.
type BinPacking struct {
	Harness *harness.Harness
	Namer   NodeNamer
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
}

// Estimate mutates the harness's snapshot; callers Fork before and Revert
// or Commit after.
func (b *BinPacking) Estimate(g *nodegroup.NodeGroup, pods []*v1.Pod, maxNodes int) (*Result, error) {
	snap := b.Harness.Snapshot()
	res := &Result{Group: g.Name, Placed: map[types.UID]string{}}
	// Nodes only fill up, so a node that rejected a kind of pod keeps
	// rejecting it: each kind keeps a cursor into NewNodes.
	cursor := map[string]int{}
	emptyNodeRejects := map[string]*harness.FitError{}
	fill := fillMemo{noReplicate: map[string]bool{}}
	kinds := b.Kinds
	if kinds == nil {
		kinds = &Kinds{}
	}
	// simulated lists the new nodes that exist in the snapshot (not the
	// counted-only ones); cursors index it.
	var simulated []string
	virtual := virtualNodes{}
	skip := 0
	for i, pod := range pods {
		if skip > 0 {
			skip--
			continue
		}
		kind := kinds.Of(pod)
		if ferr, ok := emptyNodeRejects[kind]; ok {
			res.Unplaced = append(res.Unplaced, Unplaced{Pod: pod, Err: ferr})
			continue
		}
		if b.CountOnly && virtual.take(kind) {
			res.Counted[len(res.Counted)-1].Pods++
			res.Placed[pod.UID] = virtual.node
			res.PlacedOrder = append(res.PlacedOrder, pod)
			continue
		}
		placedOn := ""
		for j := cursor[kind]; j < len(simulated); j++ {
			if _, _, ferr := b.Harness.PlaceOnAnyNode(pod, simulated[j:j+1]); ferr == nil {
				placedOn = simulated[j]
				break
			}
			fill.full(snap, simulated[j], kind)
			cursor[kind] = j + 1
		}
		if placedOn == "" {
			if b.NoNewNodeFor != nil && b.NoNewNodeFor(pod) {
				res.Unplaced = append(res.Unplaced, Unplaced{Pod: pod, Held: true})
				continue
			}
			if len(res.NewNodes) >= maxNodes {
				res.Unplaced = append(res.Unplaced, Unplaced{Pod: pod})
				continue
			}
			if m, ok := fill.perNode[kind]; ok && !b.CountOnly && fill.runOf(pods[i:], kind, m.n, kinds) {
				if b.replicate(g, m, pods[i:i+m.n], res) {
					simulated = append(simulated, res.NewNodes[len(res.NewNodes)-1])
					cursor[kind] = len(simulated) // the copy is as full as its source
					skip = m.n - 1
					continue
				}
				fill.noReplicate[kind] = true
			}
			if m, ok := fill.perNode[kind]; ok && b.CountOnly {
				n := m.n
				name := b.Namer(g.Name, len(res.NewNodes))
				res.NewNodes = append(res.NewNodes, name)
				virtual = virtualNodes{kind: kind, left: n - 1, node: name}
				res.Counted = append(res.Counted, CountedNode{Name: name, Source: m.node, Pods: 1, PerPod: m.perPod})
				res.Placed[pod.UID] = name
				res.PlacedOrder = append(res.PlacedOrder, pod)
				continue
			}
			name := b.Namer(g.Name, len(res.NewNodes))
			snap.Fork()
			if err := b.addNode(g, name); err != nil {
				snap.Revert()
				return nil, err
			}
			if _, _, ferr := b.Harness.PlaceOnAnyNode(pod, []string{name}); ferr != nil {
				snap.Revert() // an empty node of this group cannot take the pod
				emptyNodeRejects[kind] = ferr
				res.Unplaced = append(res.Unplaced, Unplaced{Pod: pod, Err: ferr})
				continue
			}
			snap.Commit()
			res.NewNodes = append(res.NewNodes, name)
			simulated = append(simulated, name)
			placedOn = name
		}
		fill.placed(placedOn, kind)
		res.Placed[pod.UID] = placedOn
		res.PlacedOrder = append(res.PlacedOrder, pod)
	}
	return res, nil
}

// replicate adds a fresh node holding a copy of the memo's placements for
// run; false (and nothing added) when the placements cannot be copied.
func (b *BinPacking) replicate(g *nodegroup.NodeGroup, m filled, run []*v1.Pod, res *Result) bool {
	snap := b.Harness.Snapshot()
	name := b.Namer(g.Name, len(res.NewNodes))
	snap.Fork()
	if err := b.addNode(g, name); err != nil {
		snap.Revert()
		return false
	}
	if err := b.Harness.Replicate(m.node, m.pods, name, run); err != nil {
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

// addNode adds a fresh node of the group with its ResourceSlices.
func (b *BinPacking) addNode(g *nodegroup.NodeGroup, name string) error {
	snap := b.Harness.Snapshot()
	node, slices := g.NewNode(name)
	if err := snap.AddNode(node); err != nil {
		return fmt.Errorf("node group %s: %w", g.Name, err)
	}
	for _, s := range slices {
		if err := snap.AddResourceSlice(s); err != nil {
			return fmt.Errorf("node group %s: %w", g.Name, err)
		}
	}
	return nil
}

// fillMemo learns how many pods of one kind fill a fresh node, from nodes
// that held only that kind when they first rejected it, and keeps those
// pods as the pattern to replicate.
type fillMemo struct {
	perNode     map[string]filled
	onNode      map[string]map[string]int // node -> kind -> pods
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
	f.onNode[node][kind]++
}

func (f *fillMemo) full(snap *snapshot.Snapshot, node, kind string) {
	kinds := f.onNode[node]
	if len(kinds) != 1 || kinds[kind] == 0 {
		return
	}
	if _, known := f.perNode[kind]; known {
		return
	}
	if f.perNode == nil {
		f.perNode = map[string]filled{}
	}
	m := filled{n: kinds[kind], node: node}
	for _, p := range snap.NodeInfo(node).Pods {
		m.pods = append(m.pods, p.GetPod())
	}
	used := NodeUsage(snap, node)
	n := float64(m.n)
	m.perPod = Usage{MilliCPU: used.Requested.MilliCPU / n, Memory: used.Requested.Memory / n, Devices: used.Requested.Devices / n}
	f.perNode[kind] = m
}

// runOf reports whether the next n pods are all of the kind and may be
// replicated.
func (f *fillMemo) runOf(pods []*v1.Pod, kind string, n int, kinds *Kinds) bool {
	if len(pods) < n || f.noReplicate[kind] {
		return false
	}
	for _, p := range pods[:n] {
		if kinds.Of(p) != kind || !harness.Replicable(p) {
			return false
		}
	}
	return true
}

// virtualNodes is the counted-only node being filled by a run of one kind.
type virtualNodes struct {
	kind string
	left int
	node string
}

func (v *virtualNodes) take(kind string) bool {
	if v.left <= 0 || v.kind != kind {
		return false
	}
	v.left--
	return true
}
