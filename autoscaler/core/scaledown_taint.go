package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"draxr.dev/draxr/autoscaler/clusterstate"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
)

// Scale-down taints: DeletionCandidateTaint on unneeded nodes,
// ToBeDeletedTaint on nodes being removed.

// markCandidates puts DeletionCandidateTaint on unneeded nodes and takes
// it off managed nodes that are no longer unneeded.
func (a *Autoscaler) markCandidates(ctx context.Context, st *clusterstate.State, unneeded map[string]bool) error {
	if a.cfg.DryRun {
		return nil
	}
	nodes, err := a.cfg.Listers.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		if st.GroupOf[n.Name] == "" || a.sd.isDeleting(n.Name) {
			continue
		}
		if want := unneeded[n.Name]; want != hasTaint(n, DeletionCandidateTaint) {
			if _, err := a.setTaint(ctx, n.Name, DeletionCandidateTaint, v1.TaintEffectPreferNoSchedule, want); err != nil {
				errs = append(errs, err)
			}
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
	var out *v1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := a.cfg.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
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
