// Scale-down actuation: candidate taints, removal batches within the
// cooldowns and parallelism limits, drains and deletions, acting on what
// findScaleDown (scaledown_find.go) decided.

package core

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/taints"
)

// The Cluster Autoscaler's taints (CA pkg/utils/taints), so tools and
// people that know CA read draxr's nodes the same way. Both carry the
// Unix time they were set.
const (
	// ToBeDeletedTaint (NoSchedule) is on every node of a scale-down
	// batch from before the first eviction until the node is gone, so an
	// evicted pod never lands on the next node of the same batch.
	ToBeDeletedTaint = taints.ToBeDeleted
	// DeletionCandidateTaint (PreferNoSchedule) marks nodes found
	// unneeded, so the scheduler prefers other nodes while they wait.
	DeletionCandidateTaint = taints.DeletionCandidate
)

// Event reasons on nodes. ScaleDown, ScaleDownFailed and
// ClusterAutoscalerCleanup are CA's; NoScaleDown carries CA's
// UnremovableReason (e.g. "BlockedByPod: NotSafeToEvictAnnotation: ...")
// for a node the drain rules keep, emitted when that reason changes.
const (
	EventScaleDown        = "ScaleDown"
	EventScaleDownFailed  = "ScaleDownFailed"
	EventCleanup          = "ClusterAutoscalerCleanup"
	EventNoScaleDown      = "NoScaleDown"
	nodeStartingGraceTime = 2 * time.Minute
)

// ScaleDownActuation are CA's flags on how nodes are removed. Zero values
// take CA's defaults where a zero would stop scale-down altogether.
type ScaleDownActuation struct {
	// Drainability are the --skip-nodes-with-* flags.
	Drainability drainability.Options
	// DelayAfterDelete / DelayAfterFailure pause scale-down after a node
	// was removed / a removal failed.
	DelayAfterDelete, DelayAfterFailure time.Duration
	// UnreadyTime: a node unready that long is removed whatever its use.
	UnreadyTime time.Duration
	// MaxScaleDownParallelism bounds nodes being removed at once (10),
	// MaxDrainParallelism those among them that need evictions (1).
	MaxScaleDownParallelism, MaxDrainParallelism int
	// MaxGracefulTermination bounds the wait for evicted pods to go
	// before the node is deleted anyway.
	MaxGracefulTermination time.Duration
	// PodGonePollInterval is how often a drain checks its evicted pods (1s).
	PodGonePollInterval time.Duration
	// MaxBulkSoftTaintCount and MaxBulkSoftTaintTime bound the nodes whose
	// DeletionCandidateTaint a loop adds or takes off, and the time it
	// spends on them; zero takes CA's defaults (10, 3s), a negative
	// count changes none.
	MaxBulkSoftTaintCount int
	MaxBulkSoftTaintTime  time.Duration
}

// withActuationDefaults fills CA's defaults for the limits whose zero
// would stop scale-down or deletion waits altogether.
func withActuationDefaults(c ScaleDownActuation) ScaleDownActuation {
	if c.MaxScaleDownParallelism == 0 {
		c.MaxScaleDownParallelism = 10
	}
	if c.MaxDrainParallelism == 0 {
		c.MaxDrainParallelism = 1
	}
	if c.PodGonePollInterval == 0 {
		c.PodGonePollInterval = time.Second
	}
	if c.MaxBulkSoftTaintCount == 0 {
		c.MaxBulkSoftTaintCount = 10
	}
	if c.MaxBulkSoftTaintTime == 0 {
		c.MaxBulkSoftTaintTime = 3 * time.Second
	}
	return c
}

// scaleDownState is what scale-down keeps between loops besides since
// when nodes are unneeded; drains run in goroutines and update it.
type scaleDownState struct {
	mu sync.Mutex
	// deleting: nodes of batches in flight -> whether they need a drain.
	deleting map[string]bool
	// removed: nodes whose removal succeeded -> when. Their Node objects
	// may stay a while (Cluster API deletes the Machine, then the node);
	// until they go they stay tainted and count as being deleted, so a
	// loop never counts them towards a min size, places pods on them or
	// takes their ToBeDeleted taint off.
	removed                 map[string]time.Time
	lastDelete, lastFailure time.Time
	// noScaleDown: the reason last emitted per node, so each change gives
	// one event, not one per loop.
	noScaleDown map[string]string
	// unremovable: the last evaluation's kept candidates, for the status.
	unremovable []scaledown.Rejection
	drains      sync.WaitGroup
}

func newScaleDownState() *scaleDownState {
	return &scaleDownState{deleting: map[string]bool{}, removed: map[string]time.Time{}, noScaleDown: map[string]string{}}
}

func (s *scaleDownState) isDeleting(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.deleting[node]
	_, gone := s.removed[node]
	return ok || gone
}

// removedNodeGrace bounds how long a removed node that is still there
// counts as being deleted: past it, the provider is not deleting it and
// housekeeping untaints it like any node no removal holds.
const removedNodeGrace = 15 * time.Minute

// forgetRemoved drops the removed nodes that are gone from the cluster,
// or that outstayed removedNodeGrace.
func (s *scaleDownState) forgetRemoved(present func(string) bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, at := range s.removed {
		if !present(node) || now.Sub(at) > removedNodeGrace {
			delete(s.removed, node)
		}
	}
}

// waitForDrains blocks until every started node removal has finished.
func (a *Autoscaler) waitForDrains() { a.sd.drains.Wait() }

// scaleDownHousekeeping runs every loop, before anything else may taint:
// ToBeDeleted taints on managed nodes no batch of this process is
// removing were left by a crash or a failed removal and come off, so no
// node stays unschedulable for good; with scale-down disabled, deletion
// candidate taints come off too.
func (a *Autoscaler) scaleDownHousekeeping(ctx context.Context, st *clusterstate.State) error {
	nodes, err := a.cfg.View.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	present := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		present[n.Name] = true
	}
	a.sd.forgetRemoved(func(node string) bool { return present[node] }, a.cfg.Now())
	if a.cfg.DryRun {
		return nil // the taints are the acting autoscaler's
	}
	var errs []error
	for _, n := range nodes {
		if st.GroupOf[n.Name] == "" {
			continue // another autoscaler's or nobody's node
		}
		if hasTaint(n, ToBeDeletedTaint) && !a.sd.isDeleting(n.Name) {
			node, err := a.setTaint(ctx, n.Name, ToBeDeletedTaint, v1.TaintEffectNoSchedule, false)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			a.cfg.Recorder.Eventf(node, v1.EventTypeNormal, EventCleanup, "removed %s taint left on a node no scale-down is removing", ToBeDeletedTaint)
		}
		if !a.cfg.ScaleDown.Enabled && hasTaint(n, DeletionCandidateTaint) {
			if _, err := a.setTaint(ctx, n.Name, DeletionCandidateTaint, v1.TaintEffectPreferNoSchedule, false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// scaleDown is the loop's scale-down: what findScaleDown finds, acted on.
func (l *loop) scaleDown(ctx context.Context) error {
	f, err := l.findScaleDown(ctx)
	if err != nil {
		return err
	}
	return l.actuateScaleDown(ctx, l.st, l.res, f)
}

// actuateScaleDown acts on what findScaleDown found: taints the unneeded
// nodes as candidates and removes those due, within the cooldowns and the
// parallelism limits.
func (a *Autoscaler) actuateScaleDown(ctx context.Context, st *clusterstate.State, res *LoopResult, f *scaleDownFindings) error {
	res.Unneeded = append(res.Unneeded, f.unneeded...)
	res.ScaleDown = f.verdicts
	opts, due, unneeded, now := f.opts, f.due, f.unneededSet, f.now

	var errs []error
	softTaintStart := time.Now()
	if err := a.markCandidates(ctx, st, unneeded); err != nil {
		errs = append(errs, err)
	}
	metrics.UpdateDurationFromStart(metrics.FunctionSoftTaint, softTaintStart)
	if len(due) == 0 {
		return errors.Join(errs...)
	}
	batch, cooldown := a.pickBatch(due, now)
	if cooldown != "" {
		klog.FromContext(ctx).V(2).Info("Scale-down in cooldown", "flag", cooldown, "due", len(due))
		return errors.Join(errs...)
	}
	if a.cfg.DryRun {
		// What would be removed, said and recorded; nothing is touched.
		for _, d := range batch {
			a.finishRemoval(d.name, true)
			res.Removed = append(res.Removed, d.name)
			a.clusterState.Event(v1.EventTypeNormal, EventScaleDown, "Scale-down: would remove node %s (%s)", d.name, removalReason(d.drain, d.unready))
		}
		return errors.Join(errs...)
	}

	// Every node of the batch is tainted before the first eviction, so no
	// evicted pod is placed on a node about to go.
	tainted, taintErrs := a.taintBatch(ctx, batch)
	errs = append(errs, taintErrs...)
	a.startRemovals(ctx, st, res, opts, tainted)
	return errors.Join(errs...)
}

// pickBatch marks the due nodes removed this loop as being deleted: none
// in a cooldown (then named by its flag), else as many as the
// parallelism limits allow, counting removals still in flight.
func (a *Autoscaler) pickBatch(due []dueNode, now time.Time) (batch []dueNode, cooldown string) {
	a.sd.mu.Lock()
	defer a.sd.mu.Unlock()
	switch {
	case now.Sub(a.sd.lastDelete) < a.cfg.ScaleDown.DelayAfterDelete:
		cooldown = "--scale-down-delay-after-delete"
	case now.Sub(a.sd.lastFailure) < a.cfg.ScaleDown.DelayAfterFailure:
		cooldown = "--scale-down-delay-after-failure"
	}
	total, drains := len(a.sd.deleting), 0
	for _, d := range a.sd.deleting {
		if d {
			drains++
		}
	}
	for _, d := range due {
		if cooldown != "" || total >= a.cfg.ScaleDown.MaxScaleDownParallelism {
			break
		}
		if d.drain && drains >= a.cfg.ScaleDown.MaxDrainParallelism {
			continue
		}
		batch = append(batch, d)
		a.sd.deleting[d.name] = d.drain
		total++
		if d.drain {
			drains++
		}
	}
	return batch, cooldown
}

// taintedNode is a node of the batch with its ToBeDeleted taint on, and
// why it goes.
type taintedNode struct {
	node   *v1.Node
	reason string
}

// taintBatch puts the ToBeDeleted taint on the batch's nodes; a node whose
// taint fails is not removed.
func (a *Autoscaler) taintBatch(ctx context.Context, batch []dueNode) ([]taintedNode, []error) {
	var tainted []taintedNode
	var errs []error
	for _, d := range batch {
		// From the informer's node, as CA: a stale copy fails the write
		// with a conflict and is read again, so it costs no safety.
		var node *v1.Node
		var err error
		if cached, getErr := a.cfg.View.Nodes.Get(d.name); getErr == nil {
			node, err = a.setTaintFrom(ctx, cached, ToBeDeletedTaint, v1.TaintEffectNoSchedule, true)
		} else {
			node, err = a.setTaint(ctx, d.name, ToBeDeletedTaint, v1.TaintEffectNoSchedule, true)
		}
		if err != nil {
			metrics.RegisterError(metrics.ErrorAPICall)
			errs = append(errs, err)
			a.finishRemoval(d.name, false)
			continue
		}
		tainted = append(tainted, taintedNode{node, removalReason(d.drain, d.unready)})
	}
	return tainted, errs
}

// startRemovals removes the tainted nodes, each in a goroutine of its own
// (a.sd.drains waits for them), and says so in the status events.
func (a *Autoscaler) startRemovals(ctx context.Context, st *clusterstate.State, res *LoopResult,
	opts func(group string) cloudprovider.NodeGroupOptions, tainted []taintedNode) {
	for _, t := range tainted {
		node := t.node
		delete(a.unneededSince, node.Name)
		res.Removed = append(res.Removed, node.Name)
		// CA's status ConfigMap events for a removal starting.
		if t.reason == metrics.ScaleDownEmpty {
			a.clusterState.Event(v1.EventTypeNormal, EventScaleDownEmpty, "Scale-down: removing empty node %q", node.Name)
		} else {
			a.clusterState.Event(v1.EventTypeNormal, EventScaleDown, "Scale-down: removing node %s (%s)", node.Name, t.reason)
		}
		a.sd.drains.Add(1)
		// The registry is the loop's: its labels are read here, not in
		// the removal's goroutine.
		group := st.GroupOf[node.Name]
		go func(node *v1.Node, group, reason string, l metrics.GroupLabels) {
			defer a.sd.drains.Done()
			start := time.Now()
			if err := a.removeNode(ctx, node, group, reason, opts(group).ScaleDownUnneededTime, l); err != nil {
				klog.FromContext(ctx).Error(err, "Scale-down failed", "node", node.Name)
			}
			metrics.UpdateDurationFromStart(metrics.FunctionNodeDeletion, start)
		}(node, group, t.reason, a.clusterState.Labels(group))
	}
}

// expendableCutoff is --expendable-pods-priority-cutoff, nil when unset.
func (a *Autoscaler) expendableCutoff() *int32 {
	if a.cfg.Pods == nil {
		return nil
	}
	c := int32(a.cfg.Pods.ExpendablePodsPriorityCutoff)
	return &c
}
