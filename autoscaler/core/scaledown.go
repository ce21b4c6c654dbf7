package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/simulator/scaledown"
)

// ScaleDownDisabledAnnotation on a node keeps it.
const ScaleDownDisabledAnnotation = "draxr.dev/scale-down-disabled"

// ToBeDeletedTaint keeps the scheduler from placing pods on a node that is
// being drained, so evicted pods' replacements land elsewhere.
const ToBeDeletedTaint = "draxr.dev/to-be-deleted"

// scaleDown finds nodes whose pods fit elsewhere, remembers since when,
// and removes those unneeded for long enough, never below a group's min.
func (a *Autoscaler) scaleDown(ctx context.Context, st *clusterstate.State, res *LoopResult) error {
	start := a.cfg.Now()
	h, err := a.simulation(ctx, st)
	if err != nil {
		return err
	}
	pdbs := newPDBBudget(a.cfg.Listers)
	removals, _ := scaledown.Find(h, scaledown.Options{
		UtilizationThreshold: a.cfg.ScaleDown.UtilizationThreshold,
		MayRemove: func(n *v1.Node) bool {
			return st.Ready[n.Name] && st.GroupOf[n.Name] != "" && n.Annotations[ScaleDownDisabledAnnotation] != "true"
		},
		Movable: pdbs.movable,
	})
	metrics.SimulationDuration.WithLabelValues("scale-down").Observe(time.Since(start).Seconds())

	// Keep within min sizes, counting nodes already removed in this set.
	size := map[string]int{}
	for node, g := range st.GroupOf {
		if st.Ready[node] {
			size[g]++
		}
	}
	now := a.cfg.Now()
	unneeded := map[string]bool{}
	var due []string
	for _, r := range removals {
		g := st.GroupOf[r.Node]
		if min := a.group(g).MinSize(); size[g]+st.Upcoming[g] <= min {
			continue
		}
		size[g]--
		unneeded[r.Node] = true
		res.Unneeded = append(res.Unneeded, r.Node)
		since, ok := a.unneededSince[r.Node]
		if !ok {
			a.unneededSince[r.Node] = now
			since = now
		}
		if now.Sub(since) >= a.cfg.ScaleDown.UnneededTime {
			due = append(due, r.Node)
		}
	}
	for node := range a.unneededSince {
		if !unneeded[node] {
			delete(a.unneededSince, node)
		}
	}
	var errs []error
	for _, node := range due {
		if err := a.removeNode(ctx, node, st.GroupOf[node]); err != nil {
			metrics.Errors.WithLabelValues("scale-down").Inc()
			errs = append(errs, err)
			continue
		}
		delete(a.unneededSince, node)
		res.Removed = append(res.Removed, node)
	}
	return errors.Join(errs...)
}

// removeNode taints the node, evicts its pods (the Eviction API enforces
// PodDisruptionBudgets) and deletes the node through the provider. If the
// drain fails the taint comes off and the node stays.
func (a *Autoscaler) removeNode(ctx context.Context, nodeName, group string) (err error) {
	node, err := a.setToBeDeleted(ctx, nodeName, true)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if _, untaintErr := a.setToBeDeleted(ctx, nodeName, false); untaintErr != nil {
				err = errors.Join(err, untaintErr)
			}
		}
	}()
	pods, err := a.cfg.Listers.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	var moved []string
	for _, p := range pods {
		if p.Spec.NodeName != nodeName || p.DeletionTimestamp != nil || daemonOrMirror(p) {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := a.cfg.Client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: evict %s/%s: %w", nodeName, p.Namespace, p.Name, err)
		}
		moved = append(moved, p.Namespace+"/"+p.Name)
	}
	if err := a.group(group).DeleteNodes(ctx, []*v1.Node{node}); err != nil {
		return fmt.Errorf("node %s: delete: %w", nodeName, err)
	}
	metrics.ScaleDowns.WithLabelValues(group).Inc()
	sort.Strings(moved)
	a.cfg.Recorder.Eventf(node, v1.EventTypeNormal, "ScaleDown", "node removed by draxr-autoscaler: unneeded for %s; evicted pods: [%s]",
		a.cfg.ScaleDown.UnneededTime, strings.Join(moved, " "))
	return nil
}

// setToBeDeleted adds or removes ToBeDeletedTaint, retrying on conflicts.
func (a *Autoscaler) setToBeDeleted(ctx context.Context, nodeName string, taint bool) (*v1.Node, error) {
	var out *v1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := a.cfg.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []v1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != ToBeDeletedTaint {
				taints = append(taints, t)
			}
		}
		if taint {
			taints = append(taints, v1.Taint{Key: ToBeDeletedTaint, Value: "draxr-autoscaler", Effect: v1.TaintEffectNoSchedule})
		}
		node.Spec.Taints = taints
		out, err = a.cfg.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: taint %s: %w", nodeName, ToBeDeletedTaint, err)
	}
	return out, nil
}

func daemonOrMirror(p *v1.Pod) bool {
	if _, ok := p.Annotations[v1.MirrorPodAnnotationKey]; ok {
		return true
	}
	ref := metav1.GetControllerOfNoCopy(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// pdbBudget tracks how many more disruptions each PodDisruptionBudget
// allows within one simulation.
type pdbBudget struct {
	pdbs    []*policyv1.PodDisruptionBudget
	allowed map[string]int32
}

func newPDBBudget(l clusterstate.Listers) *pdbBudget {
	b := &pdbBudget{allowed: map[string]int32{}}
	if l.PDBs == nil {
		return b
	}
	b.pdbs, _ = l.PDBs.List(labels.Everything())
	for _, p := range b.pdbs {
		b.allowed[p.Namespace+"/"+p.Name] = p.Status.DisruptionsAllowed
	}
	return b
}

// movable refuses pods no controller would recreate and pods whose
// PodDisruptionBudget allows no more disruptions.
func (b *pdbBudget) movable(pod *v1.Pod) error {
	if metav1.GetControllerOfNoCopy(pod) == nil {
		return fmt.Errorf("not managed by a controller, so nothing would recreate it")
	}
	for _, pdb := range b.pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		key := pdb.Namespace + "/" + pdb.Name
		if b.allowed[key] <= 0 {
			return fmt.Errorf("PodDisruptionBudget %s allows no more disruptions", key)
		}
		b.allowed[key]--
	}
	return nil
}
