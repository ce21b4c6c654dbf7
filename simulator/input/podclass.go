package input

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// PodClass is where a pod stands for planning. Every reader of the
// cluster (a dump, draxr simulate --kubeconfig, the autoscaler's loop)
// classifies pods with ClassifyPod; where they file a class differently
// is said once, in SimulateFiling and LoopFiling.
type PodClass int

// Pod classes, in the order ClassifyPod tests them.
const (
	// PodFinished: phase Succeeded or Failed. It holds nothing: the
	// scheduler's informers filter it out.
	PodFinished PodClass = iota
	// PodRunning: bound to a node (spec.nodeName), not being deleted.
	PodRunning
	// PodTerminatingBound: bound, being deleted; the scheduler's cache holds
	// its room until it is gone.
	PodTerminatingBound
	// PodTerminatingPending: unbound and being deleted; it will never run.
	PodTerminatingPending
	// PodBeingBound: unbound, but the scheduler has assumed it on a node:
	// its claims are allocated and reserved for it (or its
	// extended-resource claim is named in its status) while PreBind runs.
	PodBeingBound
	// PodGated: it has scheduling gates; the scheduler does not try it.
	PodGated
	// PodUnschedulable: the scheduler tried it and found no node
	// (PodScheduled=False, reason Unschedulable).
	PodUnschedulable
	// PodUnprocessed: pending, and no scheduler has given up on it yet.
	PodUnprocessed
)

func (c PodClass) String() string {
	switch c {
	case PodFinished:
		return "Finished"
	case PodRunning:
		return "Running"
	case PodTerminatingBound:
		return "TerminatingBound"
	case PodTerminatingPending:
		return "TerminatingPending"
	case PodBeingBound:
		return "BeingBound"
	case PodGated:
		return "Gated"
	case PodUnschedulable:
		return "Unschedulable"
	case PodUnprocessed:
		return "Unprocessed"
	}
	return fmt.Sprintf("PodClass(%d)", int(c))
}

// ClassifyPod says where a pod stands. inBinding are the pods whose claims
// are allocated and reserved for them (PodsInBinding); nil when the
// claims are not known yet, as while a dump is parsed.
func ClassifyPod(p *v1.Pod, inBinding map[types.UID]string) PodClass {
	switch {
	case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
		return PodFinished
	case p.Spec.NodeName != "" && p.DeletionTimestamp != nil:
		return PodTerminatingBound
	case p.Spec.NodeName != "":
		return PodRunning
	case p.DeletionTimestamp != nil:
		return PodTerminatingPending
	case BeingBound(inBinding, p):
		return PodBeingBound
	case len(p.Spec.SchedulingGates) > 0:
		return PodGated
	case GivenUpOn(p):
		return PodUnschedulable
	}
	return PodUnprocessed
}

// GivenUpOn reports a pod the scheduler tried and found no node for.
func GivenUpOn(p *v1.Pod) bool {
	_, c := podutil.GetPodCondition(&p.Status, v1.PodScheduled)
	return c != nil && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable
}

// Tried reports a pod some scheduler has tried: it has a PodScheduled
// condition, whatever its status.
func Tried(p *v1.Pod) bool {
	_, c := podutil.GetPodCondition(&p.Status, v1.PodScheduled)
	return c != nil
}

// SchedulerName is the pod's scheduler; the API server defaults an empty
// name to default-scheduler.
func SchedulerName(p *v1.Pod) string {
	if p.Spec.SchedulerName == "" {
		return v1.DefaultSchedulerName
	}
	return p.Spec.SchedulerName
}

// SiblingKey is a controller (by UID) and the scheduler of its pods: the
// pods of one key are siblings, which a burst (a Job's 1,000 pods) is
// planned and batched as.
type SiblingKey struct {
	Controller types.UID
	Scheduler  string
}

// SiblingKeyOf is the pod's SiblingKey; false for a pod no controller
// owns.
func SiblingKeyOf(p *v1.Pod) (SiblingKey, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return SiblingKey{}, false
	}
	return SiblingKey{Controller: ref.UID, Scheduler: SchedulerName(p)}, true
}

// Filing is what a reader does with a pod of a class.
type Filing int

// Filings.
const (
	// Dropped: not read at all.
	Dropped Filing = iota
	// OnItsNode: a running pod on its node (Objects.RunningPods).
	OnItsNode
	// OnAssumedNode: a running pod on the node the scheduler is binding it
	// to, as the scheduler assumes it; left out when that node is unknown.
	OnAssumedNode
	// ToPlan: a pending pod (Objects.PendingPods); the planner plans for
	// it or says why not (gated, being deleted, waiting on binding).
	ToPlan
	// NotTriedYet: counted, not planned: the scheduler may still place it.
	NotTriedYet
)

// SimulateFiling is how draxr simulate files pods, from a dump or a live
// cluster: every unfinished pod is read, and each pending one gets a plan
// or a reason, so that a person sees why nothing is planned for it.
func SimulateFiling(c PodClass) Filing {
	switch c {
	case PodFinished:
		return Dropped
	case PodRunning, PodTerminatingBound:
		return OnItsNode
	case PodBeingBound:
		return OnAssumedNode
	}
	return ToPlan
}

// LoopFiling is how the autoscaler's loop files pods, as CA does: it
// plans only for pods the scheduler gave up on, and it leaves out
// terminating pods, bound or not: they are gone before new nodes could
// come, and CA counts neither their room nor their need. Pods of a
// bypassed scheduler (--bypassed-scheduler-names) no scheduler has tried
// count as given up on; the caller tells them apart.
func LoopFiling(c PodClass) Filing {
	switch c {
	case PodRunning:
		return OnItsNode
	case PodBeingBound:
		return OnAssumedNode
	case PodUnschedulable:
		return ToPlan
	case PodUnprocessed:
		return NotTriedYet
	}
	return Dropped
}
