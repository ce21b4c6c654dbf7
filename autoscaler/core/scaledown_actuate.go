// Scale-down actuation: candidate taints, removal batches within the
// cooldowns and parallelism limits, drains and deletions, acting on what
// findScaleDown (scaledown_find.go) decided.

package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
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
	return c
}

// scaleDownState is what scale-down keeps between loops besides since
// when nodes are unneeded; drains run in goroutines and update it.
type scaleDownState struct {
	mu sync.Mutex
	// deleting: nodes of batches in flight -> whether they need a drain.
	deleting                map[string]bool
	lastDelete, lastFailure time.Time
	// noScaleDown: the reason last emitted per node, so each change gives
	// one event, not one per loop.
	noScaleDown map[string]string
	// unremovable: the last evaluation's kept candidates, for the status.
	unremovable []scaledown.Rejection
	drains      sync.WaitGroup
}

func newScaleDownState() *scaleDownState {
	return &scaleDownState{deleting: map[string]bool{}, noScaleDown: map[string]string{}}
}

func (s *scaleDownState) isDeleting(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.deleting[node]
	return ok
}

// waitForDrains blocks until every started node removal has finished.
func (a *Autoscaler) waitForDrains() { a.sd.drains.Wait() }

// scaleDownHousekeeping runs every loop, before anything else may taint:
// ToBeDeleted taints on managed nodes no batch of this process is
// removing were left by a crash or a failed removal and come off, so no
// node stays unschedulable for good; with scale-down disabled, deletion
// candidate taints come off too.
func (a *Autoscaler) scaleDownHousekeeping(ctx context.Context, st *clusterstate.State) error {
	if a.cfg.DryRun {
		return nil // the taints are the acting autoscaler's
	}
	nodes, err := a.cfg.Listers.Nodes.List(labels.Everything())
	if err != nil {
		return err
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

// scaleDown acts on what findScaleDown found: taints the unneeded nodes
// as candidates and removes those due, within the cooldowns and the
// parallelism limits.
func (a *Autoscaler) scaleDown(ctx context.Context, st *clusterstate.State, res *LoopResult) error {
	f, err := a.findScaleDown(ctx, st)
	if err != nil {
		return err
	}
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
	a.sd.mu.Lock()
	cooldown := ""
	switch {
	case now.Sub(a.sd.lastDelete) < a.cfg.ScaleDown.DelayAfterDelete:
		cooldown = "--scale-down-delay-after-delete"
	case now.Sub(a.sd.lastFailure) < a.cfg.ScaleDown.DelayAfterFailure:
		cooldown = "--scale-down-delay-after-failure"
	}
	// Pick the batch within the parallelism limits, counting removals
	// still in flight.
	total, drains := len(a.sd.deleting), 0
	for _, d := range a.sd.deleting {
		if d {
			drains++
		}
	}
	var batch []dueNode
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
	a.sd.mu.Unlock()
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
	type taintedNode struct {
		node   *v1.Node
		reason string
	}
	var tainted []taintedNode
	for _, d := range batch {
		node, err := a.setTaint(ctx, d.name, ToBeDeletedTaint, v1.TaintEffectNoSchedule, true)
		if err != nil {
			metrics.RegisterError(metrics.ErrorAPICall)
			errs = append(errs, err)
			a.finishRemoval(d.name, false)
			continue
		}
		tainted = append(tainted, taintedNode{node, removalReason(d.drain, d.unready)})
	}
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
	return errors.Join(errs...)
}

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
	var evicted []*v1.Pod
	for _, p := range append(d.Move, d.Evict...) {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := a.cfg.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			metrics.RegisterEvictions(1, metrics.EvictionFailed)
			a.cfg.Recorder.Eventf(p, v1.EventTypeWarning, EventScaleDownFailed, "failed to delete pod for ScaleDown: %v", err)
			return fmt.Errorf("node %s: evict %s/%s: %w", node.Name, p.Namespace, p.Name, err)
		}
		metrics.RegisterEvictions(1, metrics.EvictionSucceeded)
		a.cfg.Recorder.Eventf(p, v1.EventTypeNormal, EventScaleDown, "deleting pod for node scale down")
		evicted = append(evicted, p)
	}
	a.waitPodsGone(ctx, node.Name, evicted)
	if err := a.group(group).DeleteNodes(ctx, []*v1.Node{node}); err != nil {
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

// waitPodsGone polls until every evicted pod has terminated (deleted,
// replaced under the same name, or finished) or the graceful termination
// bound has passed: deleting the node earlier would kill them mid-way.
func (a *Autoscaler) waitPodsGone(ctx context.Context, nodeName string, pods []*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	left := pods
	err := wait.PollUntilContextTimeout(ctx, a.cfg.ScaleDown.PodGonePollInterval, a.cfg.ScaleDown.MaxGracefulTermination, true, func(ctx context.Context) (bool, error) {
		var still []*v1.Pod
		for _, p := range left {
			cur, err := a.cfg.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
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

// finishRemoval ends a node's removal and starts the matching cooldown.
func (a *Autoscaler) finishRemoval(node string, ok bool) {
	a.sd.mu.Lock()
	defer a.sd.mu.Unlock()
	delete(a.sd.deleting, node)
	if ok {
		a.sd.lastDelete = a.cfg.Now()
	} else {
		a.sd.lastFailure = a.cfg.Now()
	}
}

func (a *Autoscaler) pdbs() ([]*policyv1.PodDisruptionBudget, error) {
	if a.cfg.Listers.PDBs == nil {
		return nil, nil
	}
	return a.cfg.Listers.PDBs.List(labels.Everything())
}

// podsOn lists the pods bound to a node.
func (a *Autoscaler) podsOn(nodeName string) ([]*v1.Pod, error) {
	pods, err := a.cfg.Listers.Pods.List(labels.Everything())
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

// expendableCutoff is --expendable-pods-priority-cutoff, nil when unset.
func (a *Autoscaler) expendableCutoff() *int32 {
	if a.cfg.Pods == nil {
		return nil
	}
	c := int32(a.cfg.Pods.ExpendablePodsPriorityCutoff)
	return &c
}
