package clusterstate

import (
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/taints"
)

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
	return c != nil && c.Status == v1.ConditionTrue && !tc.HoldsBack(n)
}
