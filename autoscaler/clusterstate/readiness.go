package clusterstate

import (
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/taints"
)

// heldBack reports whether something keeps a node whose Ready condition
// is True from taking pods, as CA reads readiness: a pressure condition, a
// condition taint or a startup taint. The node lifecycle controller's
// not-ready taint outlives the Ready condition by a moment on every new
// node: counted as capacity then, the node would take none of the pods
// planned for it and the planner would add another.
func heldBack(n *v1.Node, tc taints.Config) bool {
	for _, c := range n.Status.Conditions {
		if (c.Type == v1.NodeDiskPressure || c.Type == v1.NodeNetworkUnavailable) && c.Status == v1.ConditionTrue {
			return true
		}
	}
	for _, t := range n.Spec.Taints {
		switch {
		case t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeDiskPressure || t.Key == v1.TaintNodeNetworkUnavailable,
			tc.IsStartup(t.Key):
			return true
		}
	}
	return false
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// isReady is CA's readiness: the Ready condition True and nothing
// holding the node back.
func isReady(n *v1.Node, tc taints.Config) bool {
	c := readyCondition(n)
	return c != nil && c.Status == v1.ConditionTrue && !heldBack(n, tc)
}
