package local

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	nodeutil "k8s.io/component-helpers/node/util"

	"draxr.dev/draxr/cloudprovider/apinodes"
)

// advance moves a node one step: Ready once NodeReadyDelay has passed
// since creation, then its DRA driver's slices once SlicesDelay has passed
// since it turned Ready.
func (g *group) advance(ctx context.Context, n *v1.Node) error {
	now := g.p.opts.Now()
	_, ready := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	if ready == nil || ready.Status != v1.ConditionTrue {
		delay, never := g.nodeReadyDelay()
		if never || now.Sub(n.CreationTimestamp.Time) < delay {
			return nil
		}
		return g.markReady(ctx, n)
	}
	if len(g.Cfg.Spec.ResourceSlices) == 0 || now.Sub(ready.LastTransitionTime.Time) < g.p.opts.SlicesDelay {
		return nil
	}
	return g.publishSlices(ctx, n)
}

// liftNotReadyTaint is the node lifecycle controller's part for a test
// node that reports Ready itself.
func (g *group) liftNotReadyTaint(ctx context.Context, n *v1.Node) error {
	if _, c := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady); c == nil || c.Status != v1.ConditionTrue {
		return nil
	}
	var kept []v1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != v1.TaintNodeNotReady {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(n.Spec.Taints) {
		return nil
	}
	n = n.DeepCopy()
	n.Spec.Taints = kept
	if _, err := g.p.opts.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("node %s: lift not-ready taint: %w", n.Name, err)
	}
	return nil
}

// markReady reports Ready and lifts the not-ready taint the API server's
// admission added, which the node lifecycle controller would lift for a
// kubelet-backed node.
func (g *group) markReady(ctx context.Context, n *v1.Node) error {
	c := g.p.opts.Client.CoreV1().Nodes()
	n = n.DeepCopy()
	now := metav1.NewTime(g.p.opts.Now())
	_, cond := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	if cond == nil {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady})
		cond = &n.Status.Conditions[len(n.Status.Conditions)-1]
	}
	cond.Status, cond.Reason, cond.LastTransitionTime, cond.LastHeartbeatTime = v1.ConditionTrue, "KubeletReady", now, now
	updated, err := c.UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: mark Ready: %w", n.Name, err)
	}
	var kept []v1.Taint
	for _, t := range updated.Spec.Taints {
		if t.Key != v1.TaintNodeNotReady && t.Key != v1.TaintNodeUnreachable {
			kept = append(kept, t)
		}
	}
	if len(kept) != len(updated.Spec.Taints) {
		updated.Spec.Taints = kept
		if _, err := c.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s: lift not-ready taint: %w", n.Name, err)
		}
	}
	return nil
}

// publishSlices creates the node's slices, owned by the Node so that they
// go with it, as a kubelet plugin's slices do.
func (g *group) publishSlices(ctx context.Context, n *v1.Node) error {
	g.p.mu.Lock()
	done := g.p.published[publishedKey(n)]
	g.p.mu.Unlock()
	if done {
		return nil
	}
	_, slices := g.Cfg.NewNode(n.Name)
	if err := apinodes.PublishSlices(ctx, g.p.opts.Client, n, slices); err != nil {
		return err
	}
	g.p.mu.Lock()
	g.p.published[publishedKey(n)] = true
	g.p.mu.Unlock()
	return nil
}

// publishedKey names a node incarnation: a node deleted and created again
// under its name publishes anew.
func publishedKey(n *v1.Node) string { return n.Name + "/" + string(n.UID) }

// NodeReadyDelayAnnotation on a NodeGroup overrides the provider's
// NodeReadyDelay for that group: a duration, or "never" for nodes that
// register and never turn Ready (to try the autoscaler's provision
// timeouts without a broken machine).
const NodeReadyDelayAnnotation = "local.draxr.dev/node-ready-delay"

func (g *group) nodeReadyDelay() (time.Duration, bool) {
	v, ok := g.Cfg.Annotations[NodeReadyDelayAnnotation]
	if !ok {
		return g.p.opts.NodeReadyDelay, false
	}
	if v == "never" {
		return 0, true
	}
	return g.readyDelay, false
}
