package snapshot

import (
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PodAdded is one pod added to a node, as the pod log keeps it.
type PodAdded struct {
	Info fwk.PodInfo
	Node *framework.NodeInfo
}

// LogMark is a place in the pod log: what a reader of the snapshot saw.
type LogMark struct {
	// era changes when pods are removed or a fork is reverted: what was
	// computed before cannot be brought up to date by adding pods.
	era   uint64
	added int
}

// maxLogged bounds the pod log; past it the era ends and readers start
// afresh, rather than keep a building fleet's every pod.
const maxLogged = 1 << 16

// podLog records the pods added since the era began, for PreFilter state
// kept across scheduling cycles (the plugins' AddPod brings it up to date)
// instead of computed again from every placed pod.
type podLog struct {
	on    bool
	era   uint64
	added []PodAdded
}

// LogPodAdds starts the pod log; the placement engine asks for it.
func (s *Snapshot) LogPodAdds() { s.log.on = true }

// Mark is where the pod log stands now.
func (s *Snapshot) Mark() LogMark {
	return LogMark{era: s.log.era, added: len(s.log.added)}
}

// AddedSince returns the pods added since m and whether they are all the
// pods that changed. Nodes added or removed empty are not counted: the
// reader must not depend on them.
func (s *Snapshot) AddedSince(m LogMark) ([]PodAdded, bool) {
	if !s.log.on || m.era != s.log.era || m.added > len(s.log.added) {
		return nil, false
	}
	return s.log.added[m.added:], true
}

func (l *podLog) podAdded(info fwk.PodInfo, ni *framework.NodeInfo) {
	if !l.on {
		return
	}
	if len(l.added) >= maxLogged {
		l.newEra()
	}
	l.added = append(l.added, PodAdded{Info: info, Node: ni})
}

// newEra drops the log: something changed that adding pods cannot express.
func (l *podLog) newEra() {
	l.era++
	clear(l.added)
	l.added = l.added[:0]
}
