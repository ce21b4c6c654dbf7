// Package drainability decides, as the Cluster Autoscaler (CA) does, which
// pods keep their node from being removed: the same pod and node
// annotations, the same --skip-nodes-with-* defaults, PodDisruptionBudgets
// counted across a whole scale-down batch, and CA's reason names, so
// existing annotations keep meaning what they meant under CA. It reads no
// API: callers pass pods, PDBs and the time.
package drainability

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"draxr.dev/draxr/simulator/daemonsets"
)

// CA's pod and node annotations.
const (
	// SafeToEvictAnnotation: "true" makes any pod movable, "false" blocks
	// its node, "on-completion" keeps the node until the pod has finished.
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// SafeToEvictLocalVolumesAnnotation lists (comma separated) the local
	// volumes whose data may be lost.
	SafeToEvictLocalVolumesAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	// EnableDSEvictionAnnotation "true" on a DaemonSet pod evicts it before
	// its node goes (by default DaemonSet pods simply go with the node).
	EnableDSEvictionAnnotation = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"
	// ScaleDownDisabledAnnotation "true" on a node keeps it.
	ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// DraxrScaleDownDisabledAnnotation is draxr's older key with the same
	// meaning, kept as an alias so nodes annotated before still stay.
	DraxrScaleDownDisabledAnnotation = "draxr.dev/scale-down-disabled"
)

// SafeToEvict annotation values.
const (
	safeToEvictTrue         = "true"
	safeToEvictFalse        = "false"
	safeToEvictOnCompletion = "on-completion"
)

// podLongTerminatingExtra is how long past its grace period a terminating
// pod is still waited for (CA: PodLongTerminatingExtraThreshold).
const podLongTerminatingExtra = 30 * time.Second

// Options are CA's --skip-nodes-with-* flags.
type Options struct {
	SkipNodesWithLocalStorage         bool
	SkipNodesWithSystemPods           bool
	SkipNodesWithCustomControllerPods bool
}

// DefaultOptions are CA's defaults: all three true.
func DefaultOptions() Options {
	return Options{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true, SkipNodesWithCustomControllerPods: true}
}

// Outcome is what happens to a pod when its node is removed.
type Outcome int

const (
	// Move: the pod is evicted and must fit on another node.
	Move Outcome = iota
	// Evict: the pod is evicted but not placed elsewhere (a DaemonSet pod
	// with enable-ds-eviction: "true"; its DaemonSet runs it everywhere).
	Evict
	// Skip: the pod goes with the node (mirror and DaemonSet pods) or is
	// already gone (terminal, terminating for too long).
	Skip
	// Block: the pod keeps the node.
	Block
)

// PodReason is why a pod blocks its node: CA's BlockingPodReason names.
type PodReason string

const (
	NotReplicated            PodReason = "NotReplicated"
	LocalStorageRequested    PodReason = "LocalStorageRequested"
	NotSafeToEvictAnnotation PodReason = "NotSafeToEvictAnnotation"
	UnmovableKubeSystemPod   PodReason = "UnmovableKubeSystemPod"
	NotEnoughPdb             PodReason = "NotEnoughPdb"
	UnexpectedError          PodReason = "UnexpectedError"
	// SafeToEvictOnCompletion: annotated "on-completion" and still running.
	SafeToEvictOnCompletion PodReason = "SafeToEvictOnCompletion"
)

// NodeReason is why a node stays: CA's UnremovableReason names.
type NodeReason string

const (
	ScaleDownDisabledAnnotationReason NodeReason = "ScaleDownDisabledAnnotation"
	BlockedByPod                      NodeReason = "BlockedByPod"
	BlockedByOnCompletionPod          NodeReason = "BlockedByOnCompletionPod"
)

// Status is the verdict on one pod.
type Status struct {
	Outcome Outcome
	// Reason and Message are set when Outcome is Block; Message is CA's
	// wording.
	Reason  PodReason
	Message string
}

// Blocked says why a node cannot be removed.
type Blocked struct {
	Reason NodeReason
	// Pod (namespace/name) and PodReason name the blocking pod, if any.
	Pod       string
	PodReason PodReason
	Message   string
}

func (b *Blocked) Error() string { return b.String() }

// String is the reason as people read it: "BlockedByPod: NotReplicated: ns/p is not replicated".
func (b *Blocked) String() string {
	if b.PodReason == "" {
		return fmt.Sprintf("%s: %s", b.Reason, b.Message)
	}
	return fmt.Sprintf("%s: %s: %s", b.Reason, b.PodReason, b.Message)
}

// NodeDrain is what removing a node takes.
type NodeDrain struct {
	// Move are the pods to evict and place elsewhere; Evict the DaemonSet
	// pods evicted without a new place.
	Move, Evict []*v1.Pod
	// Blocked is set when the node must stay.
	Blocked *Blocked
	// pdbUse counts, per PDB, the disruptions this drain takes.
	pdbUse map[string]int32
}

type pdbEntry struct {
	key      string
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
	err      error
}

// Checker applies the rules to the pods of a batch of nodes; it tracks
// the disruptions PDBs still allow, so that nodes removed together never
// take more than a budget allows. Not safe for concurrent use.
type Checker struct {
	opts      Options
	now       time.Time
	pdbs      []pdbEntry
	remaining map[string]int32
}

// NewChecker returns a checker for one batch: pdbs are the cluster's
// PodDisruptionBudgets, now the time that decides whether a terminating
// pod is terminating for too long.
func NewChecker(opts Options, pdbs []*policyv1.PodDisruptionBudget, now time.Time) *Checker {
	c := &Checker{opts: opts, now: now, remaining: map[string]int32{}}
	for _, p := range pdbs {
		e := pdbEntry{key: p.Namespace + "/" + p.Name, pdb: p}
		if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err != nil {
			// An unreadable selector could match any pod of the namespace:
			// those pods stay rather than risk a budget being broken.
			e.err = fmt.Errorf("PodDisruptionBudget %s: spec.selector: %w", e.key, err)
		} else {
			e.selector = sel
		}
		c.pdbs = append(c.pdbs, e)
		c.remaining[e.key] = p.Status.DisruptionsAllowed
	}
	return c
}

// matching returns the PDBs covering the pod, or an error for a PDB of
// the pod's namespace that cannot be read.
func (c *Checker) matching(pod *v1.Pod) ([]string, error) {
	var keys []string
	for _, e := range c.pdbs {
		if e.pdb.Namespace != pod.Namespace {
			continue
		}
		if e.err != nil {
			return nil, e.err
		}
		// In policy/v1 an empty selector matches every pod of the namespace.
		if e.selector.Matches(labels.Set(pod.Labels)) {
			keys = append(keys, e.key)
		}
	}
	return keys, nil
}

// Pod says what removing its node does to the pod, in CA's rule order.
// PodDisruptionBudgets are checked against the budget left in this batch.
func (c *Checker) Pod(pod *v1.Pod) Status {
	st, _ := c.pod(pod)
	return st
}

func (c *Checker) pod(pod *v1.Pod) (Status, []string) {
	if IsMirrorPod(pod) || c.longTerminating(pod) {
		return Status{Outcome: Skip}, nil
	}
	ctrl := metav1.GetControllerOfNoCopy(pod)
	if IsDaemonSetPod(pod) {
		if pod.Annotations[EnableDSEvictionAnnotation] == "true" {
			return Status{Outcome: Evict}, nil
		}
		return Status{Outcome: Skip}, nil
	}
	safeToEvict := pod.Annotations[SafeToEvictAnnotation]
	if safeToEvict == safeToEvictTrue {
		return Status{Outcome: Move}, nil
	}
	if isTerminal(pod) {
		return Status{Outcome: Skip}, nil
	}
	if safeToEvict == safeToEvictOnCompletion {
		return blocked(SafeToEvictOnCompletion, "pod %s/%s is annotated %s: %q and has not completed", pod.Namespace, pod.Name, SafeToEvictAnnotation, safeToEvictOnCompletion), nil
	}
	replicated := ctrl != nil
	if c.opts.SkipNodesWithCustomControllerPods && replicated {
		replicated = replicatedKind(ctrl.Kind)
	}
	if !replicated {
		return blocked(NotReplicated, "%s/%s is not replicated", pod.Namespace, pod.Name), nil
	}
	pdbs, err := c.matching(pod)
	if err != nil {
		return blocked(UnexpectedError, "error matching pods to pdbs: %v", err), nil
	}
	if c.opts.SkipNodesWithSystemPods && pod.Namespace == metav1.NamespaceSystem && len(pdbs) == 0 {
		return blocked(UnmovableKubeSystemPod, "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: %s", pod.Name), nil
	}
	if safeToEvict == safeToEvictFalse {
		return blocked(NotSafeToEvictAnnotation, "pod annotated as not safe to evict present: %s", pod.Name), nil
	}
	if c.opts.SkipNodesWithLocalStorage && HasBlockingLocalStorage(pod) {
		return blocked(LocalStorageRequested, "pod with local storage present: %s", pod.Name), nil
	}
	for _, key := range pdbs {
		if c.remaining[key] < 1 {
			return blocked(NotEnoughPdb, "not enough pod disruption budget to move %s/%s", pod.Namespace, pod.Name), nil
		}
	}
	return Status{Outcome: Move}, pdbs
}

// replicatedKind: the controllers CA trusts to recreate a pod when
// --skip-nodes-with-custom-controller-pods is set.
func replicatedKind(kind string) bool {
	switch kind {
	case "ReplicationController", "Job", "ReplicaSet", "StatefulSet":
		return true
	}
	return false
}

func blocked(reason PodReason, format string, args ...any) Status {
	return Status{Outcome: Block, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Node checks a node and its pods. Budgets are only read; call Commit
// when the node is really removed (or planned to be) so later nodes of the
// batch see what is left.
func (c *Checker) Node(node *v1.Node, pods []*v1.Pod) NodeDrain {
	if ScaleDownDisabled(node) {
		return NodeDrain{Blocked: &Blocked{Reason: ScaleDownDisabledAnnotationReason,
			Message: fmt.Sprintf("node %s is annotated %s: \"true\"", node.Name, disabledKey(node))}}
	}
	d := NodeDrain{pdbUse: map[string]int32{}}
	for _, pod := range pods {
		st, pdbs := c.pod(pod)
		switch st.Outcome {
		case Skip:
			continue
		case Evict:
			d.Evict = append(d.Evict, pod)
			continue
		case Block:
			reason := BlockedByPod
			if st.Reason == SafeToEvictOnCompletion {
				reason = BlockedByOnCompletionPod
			}
			return NodeDrain{Blocked: &Blocked{Reason: reason, Pod: pod.Namespace + "/" + pod.Name, PodReason: st.Reason, Message: st.Message}}
		}
		// Several pods of one node may share a budget: all must fit in it.
		for _, key := range pdbs {
			d.pdbUse[key]++
			if d.pdbUse[key] > c.remaining[key] {
				return NodeDrain{Blocked: &Blocked{Reason: BlockedByPod, Pod: pod.Namespace + "/" + pod.Name, PodReason: NotEnoughPdb,
					Message: fmt.Sprintf("not enough pod disruption budget to move %s/%s", pod.Namespace, pod.Name)}}
			}
		}
		d.Move = append(d.Move, pod)
	}
	return d
}

// Commit takes a drain's disruptions from the budgets.
func (c *Checker) Commit(d NodeDrain) {
	for key, n := range d.pdbUse {
		c.remaining[key] -= n
	}
}

// ScaleDownDisabled reports CA's node annotation (or draxr's alias).
func ScaleDownDisabled(node *v1.Node) bool {
	return disabledKey(node) != ""
}

func disabledKey(node *v1.Node) string {
	for _, key := range []string{ScaleDownDisabledAnnotation, DraxrScaleDownDisabledAnnotation} {
		if node.Annotations[key] == "true" {
			return key
		}
	}
	return ""
}

// IsMirrorPod: static pods the kubelet mirrors leave with their node.
func IsMirrorPod(pod *v1.Pod) bool {
	_, ok := pod.Annotations[v1.MirrorPodAnnotationKey]
	return ok
}

// IsDaemonSetPod: pods a DaemonSet controls.
func IsDaemonSetPod(pod *v1.Pod) bool { return daemonsets.IsDaemonSetPod(pod) }

// isTerminal: the pod will not run again.
func isTerminal(pod *v1.Pod) bool {
	switch pod.Status.Phase {
	case v1.PodFailed:
		return true
	case v1.PodSucceeded:
		return pod.Spec.RestartPolicy == v1.RestartPolicyNever || pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
	}
	return false
}

// longTerminating: deleted longer ago than its grace period plus CA's
// margin, so it no longer counts.
func (c *Checker) longTerminating(pod *v1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	grace := int64(v1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return pod.DeletionTimestamp.Add(time.Duration(grace) * time.Second).Add(podLongTerminatingExtra).Before(c.now)
}

// HasBlockingLocalStorage: an emptyDir (not in memory) or hostPath volume
// not listed in the safe-to-evict-local-volumes annotation.
func HasBlockingLocalStorage(pod *v1.Pod) bool {
	safe := map[string]bool{}
	if list := pod.Annotations[SafeToEvictLocalVolumesAnnotation]; list != "" {
		for _, name := range strings.Split(list, ",") {
			safe[strings.TrimSpace(name)] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory)
		if local && !safe[v.Name] {
			return true
		}
	}
	return false
}
