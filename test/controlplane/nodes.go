package controlplane

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddReadyNode creates a Node and sets its status (capacity, allocatable,
// Ready) as a kubelet would; there is no kubelet behind it.
func (cp *ControlPlane) AddReadyNode(ctx context.Context, node *v1.Node) (*v1.Node, error) {
	status := node.Status
	if len(status.Allocatable) == 0 {
		status.Allocatable = status.Capacity
	}
	ready := false
	for _, c := range status.Conditions {
		ready = ready || c.Type == v1.NodeReady
	}
	if !ready {
		status.Conditions = append(status.Conditions, v1.NodeCondition{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		})
	}
	created, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", node.Name, err)
	}
	created.Status = status
	updated, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s status: %w", node.Name, err)
	}
	// The TaintNodesByCondition admission plugin marks new nodes not-ready;
	// the node lifecycle controller would lift that once the node reports
	// Ready, but it also evicts from nodes without kubelet heartbeats, so
	// the harness lifts the taint itself.
	var kept []v1.Taint
	for _, taint := range updated.Spec.Taints {
		if taint.Key != v1.TaintNodeNotReady {
			kept = append(kept, taint)
		}
	}
	if len(kept) != len(updated.Spec.Taints) {
		updated.Spec.Taints = kept
		if updated, err = cp.Client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("node %s taints: %w", node.Name, err)
		}
	}
	return updated, nil
}
