// Package taints is CA's taint configuration: which taints mean a node
// is still starting (startup taints), which only report a state (status
// taints), and which a node group template copied from a live node
// leaves out.
package taints

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// CA's built-in prefixes, on whatever the flags add.
const (
	IgnoreTaintPrefix  = "ignore-taint.cluster-autoscaler.kubernetes.io/"
	StartupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"
	StatusTaintPrefix  = "status-taint.cluster-autoscaler.kubernetes.io/"
)

// The autoscaler's own taints.
const (
	ToBeDeleted       = "ToBeDeletedByClusterAutoscaler"
	DeletionCandidate = "DeletionCandidateOfClusterAutoscaler"
)

// Config is what the flags say: --startup-taint (and --ignore-taint, its
// older name), --startup-taint-prefix and --status-taint.
type Config struct {
	StartupTaints        []string
	StartupTaintPrefixes []string
	StatusTaints         []string
}

// IsStartup reports a taint that holds a node back until it is lifted:
// a node carrying one is still starting, whatever its Ready condition.
func (c Config) IsStartup(key string) bool {
	if strings.HasPrefix(key, IgnoreTaintPrefix) || strings.HasPrefix(key, StartupTaintPrefix) {
		return true
	}
	for _, k := range c.StartupTaints {
		if k == key {
			return true
		}
	}
	for _, p := range c.StartupTaintPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// IsStatus reports a taint that reports a node's state without making
// it unready.
func (c Config) IsStatus(key string) bool {
	if strings.HasPrefix(key, StatusTaintPrefix) {
		return true
	}
	for _, k := range c.StatusTaints {
		if k == key {
			return true
		}
	}
	return false
}

// IsCondition reports the taints Kubernetes derives from node conditions
// and life-cycle states: transient, so never part of a template.
func IsCondition(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") || key == "node.cloudprovider.kubernetes.io/uninitialized" ||
		key == "node.cloudprovider.kubernetes.io/shutdown"
}

// HoldsBack reports whether something keeps a node whose Ready condition
// is True from taking pods, as CA reads readiness: a pressure condition, a
// condition taint or a startup taint. The node lifecycle controller's
// not-ready taint outlives the Ready condition by a moment on every new
// node: counted as capacity then, the node would take none of the pods
// planned for it and the planner would add another.
func (c Config) HoldsBack(n *v1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if (cond.Type == v1.NodeDiskPressure || cond.Type == v1.NodeNetworkUnavailable) && cond.Status == v1.ConditionTrue {
			return true
		}
	}
	for _, t := range n.Spec.Taints {
		switch {
		case t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeDiskPressure || t.Key == v1.TaintNodeNetworkUnavailable,
			c.IsStartup(t.Key):
			return true
		}
	}
	return false
}

// LeftOutOfTemplate reports a taint a template copied from a live node
// does not keep: the autoscaler's own, condition taints, startup and
// status taints. A new node will not have them, or not for long.
func (c Config) LeftOutOfTemplate(key string) bool {
	return key == ToBeDeleted || key == DeletionCandidate || IsCondition(key) || c.IsStartup(key) || c.IsStatus(key)
}
