package scaleup

import (
	"fmt"
	"strings"

	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
)

// countLimits counts, when a cluster-wide maximum is set, what the nodes
// already in the snapshot take from each limit (live nodes and, in the
// live loop, nodes coming up as their template) and what one new node of
// each group adds. GPUs are counted by extended resource name, device
// plugin or DRA alike.
func (st *state) countLimits() {
	lim := st.p.Limits.Limits
	if !lim.HasMax() {
		return
	}
	snap := st.p.Engine.Snapshot()
	st.counted = limits.Amounts{}
	for _, name := range snap.NodeNames() {
		var extended []dynres.Entry
		if lim.NeedsDevices() {
			extended = st.p.Matcher.ForNode(snap, name)
		}
		st.counted.Add(lim.Of(snap.NodeInfo(name).Node(), extended), 1)
	}
	st.perNode = map[string]limits.Amounts{}
	for _, g := range st.groups {
		node, _ := g.NewNode("template-" + g.Name)
		st.perNode[g.Name] = lim.Of(node, st.template[g.Name])
	}
}

// left is what the limits leave after the counted nodes and the nodes
// this plan added.
func (st *state) left() limits.Amounts {
	total := limits.Amounts{}
	total.Add(st.counted, 1)
	for g, n := range st.planned {
		total.Add(st.perNode[g], int64(n))
	}
	return st.p.Limits.Limits.Left(total)
}

// limitReached says, in CA's words and with the numbers, which maximums
// leave no room for one more node of the group; "" when none does.
func (st *state) limitReached(g *nodegroup.NodeGroup) string {
	if st.perNode == nil {
		return ""
	}
	left := st.left()
	per := st.perNode[g.Name]
	_, exceeded := limits.NodesWithin(left, per, 1)
	if len(exceeded) == 0 {
		return ""
	}
	lim := st.p.Limits.Limits
	details := make([]string, len(exceeded))
	for i, r := range exceeded {
		details[i] = fmt.Sprintf("%s leaves %s, a node adds %s", lim.Flag(r), limits.Quantity(r, left[r]), limits.Quantity(r, per[r]))
	}
	return fmt.Sprintf("%s (%s)", limits.MaxReached(exceeded), strings.Join(details, "; "))
}
