package snapshot

import (
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PodAdded is one pod added to a node, as the change log keeps it.
type PodAdded struct {
	Info fwk.PodInfo
	Node *framework.NodeInfo
}

// Added is what the change log holds since a mark: the pods and the
// nodes added, in order.
type Added struct {
	Pods  []PodAdded
	Nodes []*framework.NodeInfo
}

// LogMark is a place in the change log: what a reader of the snapshot saw.
type LogMark struct {
	// era changes when pods or nodes are removed or a fork is reverted:
	// what was computed before cannot be brought up to date by additions.
	era         uint64
	pods, nodes int
}

// maxLogged bounds the log; past it the era ends and readers start
// afresh, rather than keep a building fleet's every pod.
const maxLogged = 1 << 16

// changeLog records the pods and nodes added since the era began, for
// PreFilter state kept across scheduling cycles (the plugins' AddPod
// brings it up to date) instead of computed again from every placed pod.
type changeLog struct {
	on    bool
	era   uint64
	added Added
}

// LogAdditions starts the change log; the placement engine asks for it.
func (s *Snapshot) LogAdditions() { s.log.on = true }

// Mark is where the change log stands now.
func (s *Snapshot) Mark() LogMark {
	return LogMark{era: s.log.era, pods: len(s.log.added.Pods), nodes: len(s.log.added.Nodes)}
}

// AddedSince returns the pods and nodes added since m, and false when
// something else changed since (a removal, a revert).
func (s *Snapshot) AddedSince(m LogMark) (Added, bool) {
	l := &s.log
	if !l.on || m.era != l.era || m.pods > len(l.added.Pods) || m.nodes > len(l.added.Nodes) {
		return Added{}, false
	}
	return Added{Pods: l.added.Pods[m.pods:], Nodes: l.added.Nodes[m.nodes:]}, true
}

func (l *changeLog) podAdded(info fwk.PodInfo, ni *framework.NodeInfo) {
	if !l.on {
		return
	}
	if len(l.added.Pods) >= maxLogged {
		l.newEra()
	}
	l.added.Pods = append(l.added.Pods, PodAdded{Info: info, Node: ni})
}

func (l *changeLog) nodeAdded(ni *framework.NodeInfo) {
	if !l.on {
		return
	}
	if len(l.added.Nodes) >= maxLogged {
		l.newEra()
	}
	l.added.Nodes = append(l.added.Nodes, ni)
}

// newEra drops the log: something changed that additions cannot express.
func (l *changeLog) newEra() {
	l.era++
	clear(l.added.Pods)
	clear(l.added.Nodes)
	l.added.Pods, l.added.Nodes = l.added.Pods[:0], l.added.Nodes[:0]
}
