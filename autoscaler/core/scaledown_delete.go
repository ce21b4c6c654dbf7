package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/simulator/drainability"
	v1 "k8s.io/api/core/v1"
)

// Removing one node: the drainability rules again, the drain, the wait,
// the provider's DeleteNodes.

// removeNode evicts the node's pods (the Eviction API enforces
// PodDisruptionBudgets), waits until they have terminated or
// --max-graceful-termination-sec has passed, and deletes the node through
// the provider. On failure the ToBeDeleted taint comes off and the node
// stays.
func (a *Autoscaler) removeNode(ctx context.Context, node *v1.Node, group, reason string, unneededTime time.Duration,
	l metrics.GroupLabels) (err error) {
	errType := metrics.ErrorAPICall
	defer func() {
		if err != nil {
			metrics.RegisterError(errType)
			if untainted, untaintErr := a.setTaint(ctx, node.Name, ToBeDeletedTaint, v1.TaintEffectNoSchedule, false); untaintErr != nil {
				err = errors.Join(err, untaintErr)
			} else if untainted != nil { // nil: the node is gone already
				node = untainted
			}
			a.cfg.Recorder.Eventf(node, v1.EventTypeWarning, EventScaleDownFailed, "failed to remove node: %v", err)
		}
		a.finishRemoval(node.Name, err == nil)
	}()
	pods, err := a.podsOn(node.Name)
	if err != nil {
		return err
	}
	pdbs, err := a.pdbs()
	if err != nil {
		return err
	}
	// The rules again, on the pods there now: one may have arrived since
	// the simulation.
	d := drainability.NewChecker(a.cfg.ScaleDown.Drainability, pdbs, a.cfg.Now()).Node(node, pods)
	if d.Blocked != nil {
		return fmt.Errorf("node %s: %s", node.Name, d.Blocked)
	}
	evicted, err := a.evictPods(ctx, node, append(d.Move, d.Evict...))
	if err != nil {
		return err
	}
	a.waitPodsGone(ctx, node.Name, evicted)
	// The drain outlives its loop: a refresh since may have dropped the
	// group (an annotation turned invalid). The node stays, untainted.
	ng := a.group(group)
	if ng == nil {
		errType = metrics.ErrorCloudProvider
		return fmt.Errorf("node %s: node group %s is no longer one of the provider's; the node is kept", node.Name, group)
	}
	if err := ng.DeleteNodes(ctx, []*v1.Node{node}); err != nil {
		errType = metrics.ErrorCloudProvider
		return fmt.Errorf("node %s: delete: %w", node.Name, err)
	}
	metrics.RegisterScaleDown(1, reason, l)
	moved := make([]string, 0, len(evicted))
	for _, p := range evicted {
		moved = append(moved, p.Namespace+"/"+p.Name)
	}
	sort.Strings(moved)
	a.cfg.Recorder.Eventf(node, v1.EventTypeNormal, EventScaleDown, "node removed by draxr-autoscaler: unneeded for %s; evicted pods: [%s]",
		unneededTime, strings.Join(moved, " "))
	return nil
}

// finishRemoval ends a node's removal and starts the matching cooldown.
func (a *Autoscaler) finishRemoval(node string, ok bool) {
	a.sd.mu.Lock()
	defer a.sd.mu.Unlock()
	delete(a.sd.deleting, node)
	if ok {
		a.sd.removed[node] = a.cfg.Now()
		a.sd.lastDelete = a.cfg.Now()
	} else {
		a.sd.lastFailure = a.cfg.Now()
	}
}
