package placement

import (
	"slices"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"draxr.dev/draxr/simulator/snapshot"
)

// antiRejects remembers the nodes InterPodAffinity's anti-affinity kept a
// kind of pod off (keptStates' kinds: what the plugin reads of the pod is
// the same). While pods are only added, such a node keeps rejecting the
// kind: a pod added anywhere only adds matches to an anti-affinity term,
// in either direction. A first fit over hundreds of new nodes with a pod
// per node (hostname anti-affinity) would otherwise run every plugin on
// every node for every pod. Only callers that do not report why a node
// rejected use it: an earlier plugin may reject the node first now.
type antiRejects struct {
	snap  *snapshot.Snapshot
	nodes map[string]map[string]snapshot.LogMark // kind -> node -> when
	size  int
	// used counts the Filter runs saved.
	used int
}

// maxAntiRejects bounds what is remembered; past it all is forgotten.
const maxAntiRejects = 1 << 16

func newAntiRejects(snap *snapshot.Snapshot) *antiRejects {
	return &antiRejects{snap: snap, nodes: map[string]map[string]snapshot.LogMark{}}
}

// rejects says whether node rejected the kind by anti-affinity since
// nothing but additions happened.
func (a *antiRejects) rejects(kind, node string) bool {
	if kind == "" {
		return false
	}
	mark, ok := a.nodes[kind][node]
	if !ok {
		return false
	}
	if _, additionsOnly := a.snap.AddedSince(mark); !additionsOnly {
		delete(a.nodes[kind], node)
		return false
	}
	a.used++
	return true
}

// saw records node's Filter verdict for the kind when anti-affinity is
// what rejected it.
func (a *antiRejects) saw(kind, node string, st *fwk.Status) {
	if kind == "" || st.IsSuccess() || st.Plugin() != names.InterPodAffinity ||
		!slices.ContainsFunc(st.Reasons(), isAntiAffinityReason) {
		return
	}
	if a.size >= maxAntiRejects {
		clear(a.nodes)
		a.size = 0
	}
	if a.nodes[kind] == nil {
		a.nodes[kind] = map[string]snapshot.LogMark{}
	}
	a.nodes[kind][node] = a.snap.Mark()
	a.size++
}

func isAntiAffinityReason(r string) bool {
	return r == interpodaffinity.ErrReasonAntiAffinityRulesNotMatch || r == interpodaffinity.ErrReasonExistingAntiAffinityRulesNotMatch
}
