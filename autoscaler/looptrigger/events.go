package looptrigger

import (
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/input"
)

// Kinds of events, as Notify takes them (and the log shows them).
const (
	KindUnschedulablePod    = "unschedulable pod"
	KindProvisioningRequest = "ProvisioningRequest"
	KindCapacityBuffer      = "CapacityBuffer"
	KindGangComplete        = "PodGroup complete"
	KindSiblingCreated      = "pod created beside an unschedulable sibling"
)

// The handlers below ignore the informers' initial list: the first loop
// reads everything in it.

// UnschedulablePods notifies t when a pod becomes unschedulable: the
// scheduler set PodScheduled=False with reason Unschedulable (what CA's
// pod observer waits for too). A pod created while a sibling (same
// controller, same scheduler) was found unschedulable within the batch's
// maximum window is an event too: its controller is still creating a
// burst the scheduler has not reached, and the loop plans such pods with
// their sibling, so the batch stays open until the burst is all there
// instead of closing between the scheduler's marks.
func UnschedulablePods(t *Trigger) cache.ResourceEventHandler {
	m := &marks{t: t, at: map[input.SiblingKey]time.Time{}}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			pod, ok := obj.(*v1.Pod)
			switch {
			case !ok || initialList:
			case unschedulableSince(pod) != nil:
				m.marked(pod)
				t.Notify(KindUnschedulablePod)
			case m.siblingMarked(pod):
				t.Notify(KindSiblingCreated)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			pod, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && BecameUnschedulable(old, pod) {
				m.marked(pod)
				t.Notify(KindUnschedulablePod)
			}
		},
	}
}

// marks remembers when a pod of each controller was last found
// unschedulable, for the batch's maximum window.
type marks struct {
	t *Trigger

	mu     sync.Mutex
	at     map[input.SiblingKey]time.Time
	pruned time.Time
}

func (m *marks) marked(pod *v1.Pod) {
	key, ok := input.SiblingKeyOf(pod)
	if !ok {
		return
	}
	now := m.t.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.at[key] = now
	// Forget controllers whose marks are past the window, once a window.
	if window := m.t.cfg.BatchMax; now.Sub(m.pruned) > window {
		maps.DeleteFunc(m.at, func(_ input.SiblingKey, at time.Time) bool { return now.Sub(at) > window })
		m.pruned = now
	}
}

// siblingMarked is true for a new pod the scheduler has not tried (not
// bound, not gated, no PodScheduled condition) one of whose siblings was
// found unschedulable within the window.
func (m *marks) siblingMarked(pod *v1.Pod) bool {
	if pod.Spec.NodeName != "" || len(pod.Spec.SchedulingGates) > 0 || input.Tried(pod) ||
		pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
		return false
	}
	key, ok := input.SiblingKeyOf(pod)
	if !ok {
		return false
	}
	m.mu.Lock()
	at, seen := m.at[key]
	m.mu.Unlock()
	return seen && m.t.clock.Since(at) <= m.t.cfg.BatchMax
}

// BecameUnschedulable is true when pod is unschedulable and old was not,
// or was since another time: the scheduler writing again why a pod still
// does not fit is no news.
func BecameUnschedulable(old, pod *v1.Pod) bool {
	now := unschedulableSince(pod)
	if now == nil {
		return false
	}
	before := unschedulableSince(old)
	return before == nil || !before.LastTransitionTime.Equal(&now.LastTransitionTime)
}

// unschedulableSince is pod's PodScheduled=False/Unschedulable condition,
// or nil (bound, ended, or not found unschedulable).
func unschedulableSince(pod *v1.Pod) *v1.PodCondition {
	if pod.Spec.NodeName != "" || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// SpecChanges notifies t of objects created, or updated with another spec
// (spec returns it). Status writes, the autoscaler's own among them, are
// not events: they would start loops that write status again.
func SpecChanges(t *Trigger, kind string, spec func(obj any) any) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initialList bool) {
			if !initialList {
				t.Notify(kind)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if !equality.Semantic.DeepEqual(spec(oldObj), spec(newObj)) {
				t.Notify(kind)
			}
		},
	}
}

// ProvisioningRequestSpec is a ProvisioningRequest's spec, for SpecChanges.
func ProvisioningRequestSpec(obj any) any {
	if pr, ok := obj.(*prv1.ProvisioningRequest); ok {
		return pr.Spec
	}
	return nil
}

// UnstructuredSpec is an unstructured object's spec (a CapacityBuffer's),
// for SpecChanges.
func UnstructuredSpec(obj any) any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object["spec"]
	}
	return nil
}

// Gangs notifies a trigger when a gang's pods have all arrived: the pods
// naming a PodGroup with a gang policy (spec.schedulingGroup.podGroupName)
// reach its minCount, when the scheduler starts trying them. It counts
// the pods that have not ended, as the planner does; register Pods on the
// pod informer and PodGroups on the PodGroup informer.
type Gangs struct {
	t *Trigger

	mu sync.Mutex
	// group is each counted pod's PodGroup, by pod; pods is the count by
	// PodGroup; minCount is each gang PodGroup's.
	group    map[types.NamespacedName]types.NamespacedName
	pods     map[types.NamespacedName]int
	minCount map[types.NamespacedName]int
}

// NewGangs counts gangs for t.
func NewGangs(t *Trigger) *Gangs {
	return &Gangs{t: t, group: map[types.NamespacedName]types.NamespacedName{},
		pods: map[types.NamespacedName]int{}, minCount: map[types.NamespacedName]int{}}
}

// Pods is the pod informer's handler.
func (g *Gangs) Pods() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initialList bool) { g.pod(obj, false, !initialList) },
		UpdateFunc: func(_, obj any) { g.pod(obj, false, true) },
		DeleteFunc: func(obj any) { g.pod(obj, true, false) },
	}
}

// PodGroups is the PodGroup informer's handler.
func (g *Gangs) PodGroups() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initialList bool) { g.podGroup(obj, false, !initialList) },
		UpdateFunc: func(_, obj any) { g.podGroup(obj, false, true) },
		DeleteFunc: func(obj any) { g.podGroup(obj, true, false) },
	}
}

func (g *Gangs) pod(obj any, deleted, notify bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	counts := !deleted && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed &&
		pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil
	g.mu.Lock()
	defer g.mu.Unlock()
	group, counted := g.group[key]
	switch {
	case counts && !counted:
		group = types.NamespacedName{Namespace: pod.Namespace, Name: *pod.Spec.SchedulingGroup.PodGroupName}
		g.group[key] = group
		g.pods[group]++
		if need, ok := g.minCount[group]; notify && ok && g.pods[group] == need {
			g.t.Notify(KindGangComplete)
		}
	case !counts && counted:
		delete(g.group, key)
		if g.pods[group]--; g.pods[group] <= 0 {
			delete(g.pods, group)
		}
	}
}

func (g *Gangs) podGroup(obj any, deleted, notify bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	g.mu.Lock()
	defer g.mu.Unlock()
	if deleted || pg.Spec.SchedulingPolicy.Gang == nil {
		delete(g.minCount, key)
		return
	}
	need := int(pg.Spec.SchedulingPolicy.Gang.MinCount)
	before, known := g.minCount[key]
	g.minCount[key] = need
	// A PodGroup created after its pods, or whose minCount came down to
	// the pods there are, is complete now.
	if notify && g.pods[key] >= need && (!known || before > g.pods[key]) {
		g.t.Notify(KindGangComplete)
	}
}
