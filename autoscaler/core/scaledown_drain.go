package core

import (
	"context"
	"fmt"
	"sort"

	"draxr.dev/draxr/autoscaler/metrics"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Draining a node: its pods evicted, then waited for.

// evictPods evicts the pods through the Eviction API, which enforces
// PodDisruptionBudgets; it stops at the first refusal, returning the pods
// evicted so far.
func (a *Autoscaler) evictPods(ctx context.Context, node *v1.Node, pods []*v1.Pod) ([]*v1.Pod, error) {
	var evicted []*v1.Pod
	for _, p := range pods {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := a.cfg.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			metrics.RegisterEvictions(1, metrics.EvictionFailed)
			a.cfg.Recorder.Eventf(p, v1.EventTypeWarning, EventScaleDownFailed, "failed to delete pod for ScaleDown: %v", err)
			return evicted, fmt.Errorf("node %s: evict %s/%s: %w", node.Name, p.Namespace, p.Name, err)
		}
		metrics.RegisterEvictions(1, metrics.EvictionSucceeded)
		a.cfg.Recorder.Eventf(p, v1.EventTypeNormal, EventScaleDown, "deleting pod for node scale down")
		evicted = append(evicted, p)
	}
	return evicted, nil
}

// waitPodsGone polls until every evicted pod has terminated (deleted,
// replaced under the same name, or finished) or the graceful termination
// bound has passed: deleting the node earlier would kill them mid-way.
// It reads the informer's cache, as the loop does: a hundred drains
// polling the API server would spend the client's QPS on reads the
// removals wait behind; a cache behind the API server only makes the
// wait longer, never shorter.
func (a *Autoscaler) waitPodsGone(ctx context.Context, nodeName string, pods []*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	get := func(ctx context.Context, p *v1.Pod) (*v1.Pod, error) {
		if a.cfg.View.Pods != nil {
			return a.cfg.View.Pods.Pods(p.Namespace).Get(p.Name)
		}
		return a.cfg.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	}
	left := pods
	err := wait.PollUntilContextTimeout(ctx, a.cfg.ScaleDown.PodGonePollInterval, a.cfg.ScaleDown.MaxGracefulTermination, true, func(ctx context.Context) (bool, error) {
		var still []*v1.Pod
		for _, p := range left {
			cur, err := get(ctx, p)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				still = append(still, p) // ask again next time
			case cur.UID != p.UID || cur.Status.Phase == v1.PodSucceeded || cur.Status.Phase == v1.PodFailed:
			default:
				still = append(still, p)
			}
		}
		left = still
		return len(left) == 0, nil
	})
	if err != nil {
		klog.FromContext(ctx).Info("Evicted pods still terminating; deleting the node anyway",
			"node", nodeName, "pods", len(left), "maxGracefulTermination", a.cfg.ScaleDown.MaxGracefulTermination)
	}
}

func (a *Autoscaler) pdbs() ([]*policyv1.PodDisruptionBudget, error) {
	if a.cfg.View.PDBs == nil {
		return nil, nil
	}
	return a.cfg.View.PDBs.List(labels.Everything())
}

// podsOn lists the pods bound to a node.
func (a *Autoscaler) podsOn(nodeName string) ([]*v1.Pod, error) {
	pods, err := a.cfg.View.Pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*v1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == nodeName {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}
