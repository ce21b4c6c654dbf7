package placement

import (
	"slices"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"

	"draxr.dev/draxr/simulator/snapshot"
)

// rejectMemo remembers the nodes that kept a kind of pod off (keptStates'
// kinds: what the plugins read of the pod is the same) for reasons that
// adding pods cannot lift:
//   - InterPodAffinity's anti-affinity: a pod added anywhere only adds
//     matches to an anti-affinity term, in either direction;
//   - PodTopologySpread's skew, while no constraint's least count (as
//     Filter reads it) has risen: a node's own count only grows, and a
//     node missing a topology label keeps missing it.
//
// A first fit over thousands of new nodes, with a pod per node (hostname
// anti-affinity) or pods spread over hosts, would otherwise run every
// plugin on every node for every pod. Only callers that do not report why
// a node rejected use it: an earlier plugin may reject the node first now.
type rejectMemo struct {
	snap  *snapshot.Snapshot
	nodes map[string]map[string]rejection // kind -> node -> when, why
	size  int
	// used counts the Filter runs saved, by plugin.
	used map[string]int
}

// rejection is when a node rejected a kind, and for PodTopologySpread the
// least count of each constraint then.
type rejection struct {
	mark   snapshot.LogMark
	plugin string
	least  []int
}

// maxRejects bounds what is remembered; past it all is forgotten.
const maxRejects = 1 << 16

func newRejectMemo(snap *snapshot.Snapshot) *rejectMemo {
	return &rejectMemo{snap: snap, nodes: map[string]map[string]rejection{}, used: map[string]int{}}
}

// rejects says whether node rejected the kind for a lasting reason and
// it still holds: nothing but additions since, and no least count risen.
func (m *rejectMemo) rejects(kind, node string, c *cycle) bool {
	if kind == "" {
		return false
	}
	r, ok := m.nodes[kind][node]
	if !ok {
		return false
	}
	if _, additionsOnly := m.snap.AddedSince(r.mark); !additionsOnly || !r.stillLeast(c) {
		delete(m.nodes[kind], node)
		return false
	}
	m.used[r.plugin]++
	return true
}

// stillLeast: no least count rose since a spread rejection.
func (r rejection) stillLeast(c *cycle) bool {
	if r.plugin != names.PodTopologySpread {
		return true
	}
	now := c.spreadLeast()
	if len(now) != len(r.least) {
		return false
	}
	for i, n := range now {
		if n > r.least[i] {
			return false
		}
	}
	return true
}

// saw records node's Filter verdict for the kind when a lasting reason is
// what rejected it.
func (m *rejectMemo) saw(kind, node string, st *fwk.Status, c *cycle) {
	if kind == "" || st.IsSuccess() {
		return
	}
	r := rejection{plugin: st.Plugin()}
	switch {
	case r.plugin == names.InterPodAffinity && slices.ContainsFunc(st.Reasons(), isAntiAffinityReason):
	case r.plugin == names.PodTopologySpread && slices.ContainsFunc(st.Reasons(), isSpreadReason):
		if r.least = c.spreadLeast(); r.least == nil {
			return
		}
	default:
		return
	}
	if m.size >= maxRejects {
		clear(m.nodes)
		m.size = 0
	}
	if m.nodes[kind] == nil {
		m.nodes[kind] = map[string]rejection{}
	}
	r.mark = m.snap.Mark()
	m.nodes[kind][node] = r
	m.size++
}

func isAntiAffinityReason(r string) bool {
	return r == interpodaffinity.ErrReasonAntiAffinityRulesNotMatch || r == interpodaffinity.ErrReasonExistingAntiAffinityRulesNotMatch
}

func isSpreadReason(r string) bool {
	return r == podtopologyspread.ErrReasonConstraintsNotMatch || r == podtopologyspread.ErrReasonNodeLabelNotMatch
}

// spreadLeast is the least count each of PodTopologySpread's constraints
// holds in the cycle's state, as its Filter reads it (0 while fewer
// domains than minDomains), read once per cycle; nil when the state is not
// there or its fields are not what they were (upstream changed them).
func (c *cycle) spreadLeast() []int {
	if !c.leastRead {
		c.leastRead = true
		if data, err := c.state.Read(spreadStateKey); err == nil {
			c.least = leastCounts(data)
		}
	}
	return c.least
}

// spreadStateKey is where PodTopologySpread writes its PreFilter state.
const spreadStateKey fwk.StateKey = "PreFilter" + names.PodTopologySpread

func leastCounts(data fwk.StateData) []int {
	v, ok := readSpread(data)
	if !ok {
		return nil
	}
	out := make([]int, len(v.counts))
	for i := range out {
		out[i] = v.least(i)
	}
	return out
}
