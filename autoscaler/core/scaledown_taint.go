package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"draxr.dev/draxr/autoscaler/clusterstate"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Scale-down taints: DeletionCandidateTaint on unneeded nodes,
// ToBeDeletedTaint on nodes being removed.

// markCandidates puts DeletionCandidateTaint on unneeded nodes and takes
// it off managed nodes that are no longer unneeded, within CA's budget
// (--max-bulk-soft-taint-count nodes and --max-bulk-soft-taint-time a
// loop, taking taints off first): at the client's QPS, tainting hundreds
// of unneeded nodes at once would hold up the loop's removals. Nodes
// left over are done in later loops, in name order.
func (a *Autoscaler) markCandidates(ctx context.Context, st *clusterstate.State, unneeded map[string]bool) error {
	if a.cfg.DryRun {
		return nil
	}
	nodes, err := a.cfg.View.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	var untaint, taint []*v1.Node
	for _, n := range nodes {
		if st.GroupOf[n.Name] == "" || a.sd.isDeleting(n.Name) || hasTaint(n, ToBeDeletedTaint) {
			continue
		}
		switch want, has := unneeded[n.Name], hasTaint(n, DeletionCandidateTaint); {
		case want && !has:
			taint = append(taint, n)
		case !want && has:
			untaint = append(untaint, n)
		}
	}
	byName := func(x, y *v1.Node) int { return strings.Compare(x.Name, y.Name) }
	slices.SortFunc(untaint, byName)
	slices.SortFunc(taint, byName)
	count, limit := a.cfg.ScaleDown.MaxBulkSoftTaintCount, a.cfg.ScaleDown.MaxBulkSoftTaintTime
	start := time.Now()
	var errs []error
	all := append(untaint, taint...)
	for i, n := range all {
		if count <= 0 || time.Since(start) >= limit {
			klog.FromContext(ctx).V(2).Info("Soft taint budget used up; the other nodes are done in later loops",
				"left", len(all)-i, "maxBulkSoftTaintCount", a.cfg.ScaleDown.MaxBulkSoftTaintCount, "maxBulkSoftTaintTime", limit)
			break
		}
		count--
		add := i >= len(untaint)
		if _, err := a.setTaintFrom(ctx, n, DeletionCandidateTaint, v1.TaintEffectPreferNoSchedule, add); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err) // a node deleted meanwhile needs nothing
		}
	}
	return errors.Join(errs...)
}

func hasTaint(n *v1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// setTaint adds (valued with the Unix time, as CA) or removes a taint,
// retrying on conflicts; it writes nothing when the node is already so.
func (a *Autoscaler) setTaint(ctx context.Context, nodeName, key string, effect v1.TaintEffect, add bool) (*v1.Node, error) {
	return a.setTaintOn(ctx, nodeName, nil, key, effect, add)
}

// setTaintFrom is setTaint starting from the informer's copy of the node,
// as CA does: one write instead of a read and a write, and a read only
// after a conflict.
func (a *Autoscaler) setTaintFrom(ctx context.Context, cached *v1.Node, key string, effect v1.TaintEffect, add bool) (*v1.Node, error) {
	return a.setTaintOn(ctx, cached.Name, cached, key, effect, add)
}

func (a *Autoscaler) setTaintOn(ctx context.Context, nodeName string, cached *v1.Node, key string, effect v1.TaintEffect, add bool) (*v1.Node, error) {
	var out *v1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node := cached.DeepCopy()
		cached = nil
		if node == nil {
			var err error
			if node, err = a.cfg.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if hasTaint(node, key) == add {
			out = node
			return nil
		}
		var taints []v1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != key {
				taints = append(taints, t)
			}
		}
		if add {
			taints = append(taints, v1.Taint{Key: key, Value: strconv.FormatInt(a.cfg.Now().Unix(), 10), Effect: effect})
		}
		node.Spec.Taints = taints
		var err error
		out, err = a.cfg.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		verb := "remove"
		if add {
			verb = "add"
		}
		return nil, fmt.Errorf("node %s: %s taint %s: %w", nodeName, verb, key, err)
	}
	return out, nil
}
