package clusterstate

import (
	v1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/component-helpers/node/util"

	"draxr.dev/draxr/simulator/taints"
)

// isReady is CA's readiness: the Ready condition True and nothing
// holding the node back.
func isReady(n *v1.Node, tc taints.Config) bool {
	_, c := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	return c != nil && c.Status == v1.ConditionTrue && !tc.HoldsBack(n)
}
