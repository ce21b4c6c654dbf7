package controlplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
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
	return LiftNotReadyTaint(ctx, cp.Client, updated.Name)
}

// LiftNotReadyTaint removes the not-ready taint from a node. The
// TaintNodesByCondition admission plugin marks new nodes not-ready; the
// node lifecycle controller would lift it once the node reports Ready,
// but it also evicts from nodes without kubelet heartbeats, so the test
// control plane does not run it and its harness lifts the taint itself.
func LiftNotReadyTaint(ctx context.Context, client kubernetes.Interface, name string) (*v1.Node, error) {
	var out *v1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t v1.Taint) bool { return t.Key == v1.TaintNodeNotReady })
		if len(kept) == len(node.Spec.Taints) {
			out = node
			return nil
		}
		node.Spec.Taints = kept
		out, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: lift the not-ready taint: %w", name, err)
	}
	return out, nil
}

// WaitReadyAndUntaint waits until a kubelet reports the node Ready, then
// lifts the not-ready taint (see LiftNotReadyTaint).
func WaitReadyAndUntaint(ctx context.Context, client kubernetes.Interface, name string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready within %v: %w", name, timeout, err)
	}
	_, err = LiftNotReadyTaint(ctx, client, name)
	return err
}
