package scaleup

import (
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/nodegroup"
)

// freshValue stands in a signature for a label value no node has yet:
// not a valid label value, so it names no real one.
const freshValue = "\x00fresh"

// freshLabels tells which template label values may stand for one
// another. Pods with topology spreading or inter-pod terms read every
// label key named as a topology key, but only to compare a node's value
// with other nodes' values: a value that no node in the snapshot has yet
// makes a domain of the new nodes alone, whichever value it is. So
// groups alike but for such values (one group per zone, per rack, per
// instance type) give the same estimate, unless a selector or node
// affinity names the key (it reads the value itself).
type freshLabels struct {
	read    map[string]bool
	present map[string]map[string]bool // key -> values on the snapshot's nodes
}

// newFreshLabels returns nil where values may be read as such: nodes
// chosen by name, the profile's own node affinity, volumes (a volume's
// node affinity names zones), ResourceSlices shared by node selector, a
// gang placed in one topology domain.
func newFreshLabels(p *Planner, pods []*v1.Pod) *freshLabels {
	if p.inDomain || estimator.SelectsNodesByName(pods) || p.Engine.AddsNodeAffinity() {
		return nil
	}
	for _, pod := range pods {
		if hasVolumeClaims(&pod.Spec) {
			return nil
		}
	}
	for _, ds := range p.DaemonSets {
		if hasVolumeClaims(&ds.Spec.Template.Spec) {
			return nil
		}
	}
	snap := p.Engine.Snapshot()
	for _, s := range snap.AllResourceSlices() {
		if s.Spec.NodeSelector != nil {
			return nil
		}
	}
	present := map[string]map[string]bool{}
	for _, name := range snap.NodeNames() {
		for k, v := range snap.NodeInfo(name).Node().Labels {
			if present[k] == nil {
				present[k] = map[string]bool{}
			}
			present[k][v] = true
		}
	}
	return &freshLabels{read: selectorKeys(p, pods), present: present}
}

func hasVolumeClaims(spec *v1.PodSpec) bool {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// signature is the group's template signature with each label value no
// selector reads and no node has replaced by freshValue.
func (f *freshLabels) signature(st *state, g *nodegroup.NodeGroup) string {
	kept := make(map[string]string, len(g.Spec.Template.Labels))
	for k, v := range g.Spec.Template.Labels {
		if !f.read[k] && !f.present[k][v] {
			v = freshValue
		}
		kept[k] = v
	}
	return st.signatureWithLabels(g, kept)
}
