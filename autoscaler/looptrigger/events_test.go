package looptrigger

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// events is how many events of kind the trigger has batched.
func events(trig *Trigger, kind string) int {
	trig.mu.Lock()
	defer trig.mu.Unlock()
	return trig.batch[kind]
}

func newTrigger() *Trigger { return New(defaults, testingclock.NewFakeClock(t0)) }

func pendingPod(name string, conds ...v1.PodCondition) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Status: v1.PodStatus{Phase: v1.PodPending, Conditions: conds}}
}

func unschedulable(at time.Time, message string) v1.PodCondition {
	return v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
		Message: message, LastTransitionTime: metav1.NewTime(at)}
}

func TestUnschedulablePods(t *testing.T) {
	cond := unschedulable(t0, "0/3 nodes are available")
	bound := pendingPod("p", cond)
	bound.Spec.NodeName = "n1"
	gated := pendingPod("p", v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonSchedulingGated})
	tests := []struct {
		name string
		send func(h cache.ResourceEventHandler)
		want int
	}{
		{"an unschedulable pod in the initial list: the first loop reads it", func(h cache.ResourceEventHandler) { h.OnAdd(pendingPod("p", cond), true) }, 0},
		{"an unschedulable pod added later (a relist)", func(h cache.ResourceEventHandler) { h.OnAdd(pendingPod("p", cond), false) }, 1},
		{"a new pod the scheduler has not tried", func(h cache.ResourceEventHandler) { h.OnAdd(pendingPod("p"), false) }, 0},
		{"the scheduler finds a pod unschedulable", func(h cache.ResourceEventHandler) { h.OnUpdate(pendingPod("p"), pendingPod("p", cond)) }, 1},
		{"the scheduler writes a new reason for a pod still unschedulable",
			func(h cache.ResourceEventHandler) {
				h.OnUpdate(pendingPod("p", cond), pendingPod("p", unschedulable(t0, "0/4 nodes are available")))
			}, 0},
		{"unschedulable again after being schedulable",
			func(h cache.ResourceEventHandler) {
				h.OnUpdate(pendingPod("p", cond), pendingPod("p", unschedulable(t0.Add(time.Minute), "0/4 nodes are available")))
			}, 1},
		{"a gated pod", func(h cache.ResourceEventHandler) { h.OnUpdate(pendingPod("p"), gated) }, 0},
		{"a pod bound", func(h cache.ResourceEventHandler) { h.OnUpdate(pendingPod("p", cond), bound) }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			trig := newTrigger()
			tc.send(UnschedulablePods(trig))
			if got := events(trig, KindUnschedulablePod); got != tc.want {
				t.Errorf("%d events, want %d", got, tc.want)
			}
		})
	}
}

// A pod created while the scheduler has found a sibling unschedulable
// (the same controller, the same scheduler) within the batch's maximum
// window keeps the batch open: its controller is still creating a burst.
func TestSiblingCreated(t *testing.T) {
	jobUID := types.UID("job-1")
	ownedBy := func(uid types.UID, pod *v1.Pod) *v1.Pod {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: uid, Controller: ptr.To(true)}}
		return pod
	}
	marked := func(h cache.ResourceEventHandler) {
		h.OnUpdate(ownedBy(jobUID, pendingPod("p0")), ownedBy(jobUID, pendingPod("p0", unschedulable(t0, "0/3 nodes are available"))))
	}
	otherScheduler := ownedBy(jobUID, pendingPod("p1"))
	otherScheduler.Spec.SchedulerName = "kueue-scheduler"
	gated := ownedBy(jobUID, pendingPod("p1"))
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	bound := ownedBy(jobUID, pendingPod("p1"))
	bound.Spec.NodeName = "n1"
	tried := ownedBy(jobUID, pendingPod("p1", v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue}))
	tests := []struct {
		name string
		// after is how long after the mark the pod is created.
		after time.Duration
		mark  bool
		pod   *v1.Pod
		list  bool
		want  int
	}{
		{"a sibling created after the mark", time.Second, true, ownedBy(jobUID, pendingPod("p1")), false, 1},
		{"a sibling created at the window's end", 10 * time.Second, true, ownedBy(jobUID, pendingPod("p1")), false, 1},
		{"a sibling created after the window", 11 * time.Second, true, ownedBy(jobUID, pendingPod("p1")), false, 0},
		{"no sibling marked", time.Second, false, ownedBy(jobUID, pendingPod("p1")), false, 0},
		{"another controller's pod", time.Second, true, ownedBy("job-2", pendingPod("p1")), false, 0},
		{"a pod no controller owns", time.Second, true, pendingPod("p1"), false, 0},
		{"a sibling for another scheduler", time.Second, true, otherScheduler, false, 0},
		{"a gated sibling", time.Second, true, gated, false, 0},
		{"a sibling created bound", time.Second, true, bound, false, 0},
		{"a sibling the scheduler tried", time.Second, true, tried, false, 0},
		{"a sibling in the initial list", time.Second, true, ownedBy(jobUID, pendingPod("p1")), true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			trig := New(defaults, clk)
			h := UnschedulablePods(trig)
			if tc.mark {
				marked(h)
			}
			clk.Step(tc.after)
			h.OnAdd(tc.pod, tc.list)
			if got := events(trig, KindSiblingCreated); got != tc.want {
				t.Errorf("%d %q events, want %d", got, KindSiblingCreated, tc.want)
			}
		})
	}
}

// A ProvisioningRequest or CapacityBuffer created or given a new spec is
// an event; a status write (the autoscaler's own) is not.
func TestSpecChanges(t *testing.T) {
	pr := func(class string, conds ...metav1.Condition) *prv1.ProvisioningRequest {
		return &prv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "r"},
			Spec:   prv1.ProvisioningRequestSpec{ProvisioningClassName: class},
			Status: prv1.ProvisioningRequestStatus{Conditions: conds}}
	}
	provisioned := metav1.Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue}
	buffer := func(replicas int64, status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "b"},
			"spec": map[string]any{"replicas": replicas}, "status": status}}
	}
	tests := []struct {
		name string
		kind string
		spec func(any) any
		send func(h cache.ResourceEventHandler)
		want int
	}{
		{"a request in the initial list", KindProvisioningRequest, ProvisioningRequestSpec,
			func(h cache.ResourceEventHandler) { h.OnAdd(pr(prv1.ProvisioningClassBestEffortAtomicScaleUp), true) }, 0},
		{"a request created", KindProvisioningRequest, ProvisioningRequestSpec,
			func(h cache.ResourceEventHandler) { h.OnAdd(pr(prv1.ProvisioningClassBestEffortAtomicScaleUp), false) }, 1},
		{"a request's status written", KindProvisioningRequest, ProvisioningRequestSpec,
			func(h cache.ResourceEventHandler) {
				h.OnUpdate(pr(prv1.ProvisioningClassCheckCapacity), pr(prv1.ProvisioningClassCheckCapacity, provisioned))
			}, 0},
		{"a request's spec changed", KindProvisioningRequest, ProvisioningRequestSpec,
			func(h cache.ResourceEventHandler) {
				h.OnUpdate(pr(prv1.ProvisioningClassCheckCapacity), pr(prv1.ProvisioningClassBestEffortAtomicScaleUp))
			}, 1},
		{"a buffer created", KindCapacityBuffer, UnstructuredSpec,
			func(h cache.ResourceEventHandler) { h.OnAdd(buffer(2, nil), false) }, 1},
		{"a buffer's status written", KindCapacityBuffer, UnstructuredSpec,
			func(h cache.ResourceEventHandler) {
				h.OnUpdate(buffer(2, nil), buffer(2, map[string]any{"replicas": int64(2)}))
			}, 0},
		{"a buffer resized", KindCapacityBuffer, UnstructuredSpec,
			func(h cache.ResourceEventHandler) { h.OnUpdate(buffer(2, nil), buffer(5, nil)) }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			trig := newTrigger()
			tc.send(SpecChanges(trig, tc.kind, tc.spec))
			if got := events(trig, tc.kind); got != tc.want {
				t.Errorf("%d events, want %d", got, tc.want)
			}
		})
	}
}

func gangPod(name, group string) *v1.Pod {
	p := pendingPod(name)
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return p
}

func podGroup(name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
}

// A gang's loop starts when its last pod arrives, not on each of its pods.
func TestGangComplete(t *testing.T) {
	tests := []struct {
		name string
		send func(pods, groups cache.ResourceEventHandler)
		want int
	}{
		{"three pods of a gang of three: one event, on the third", func(pods, groups cache.ResourceEventHandler) {
			groups.OnAdd(podGroup("train", 3), false)
			pods.OnAdd(gangPod("a", "train"), false)
			pods.OnAdd(gangPod("b", "train"), false)
			pods.OnAdd(gangPod("other", "eval"), false)
			pods.OnUpdate(gangPod("b", "train"), gangPod("b", "train"))
			pods.OnAdd(gangPod("c", "train"), false)
			pods.OnAdd(gangPod("d", "train"), false)
		}, 1},
		{"two of three", func(pods, groups cache.ResourceEventHandler) {
			groups.OnAdd(podGroup("train", 3), false)
			pods.OnAdd(gangPod("a", "train"), false)
			pods.OnAdd(gangPod("b", "train"), false)
			pods.OnUpdate(gangPod("b", "train"), gangPod("b", "train"))
		}, 0},
		{"a pod ended and another took its place", func(pods, groups cache.ResourceEventHandler) {
			groups.OnAdd(podGroup("train", 2), true)
			pods.OnAdd(gangPod("a", "train"), true)
			pods.OnAdd(gangPod("b", "train"), true)
			failed := gangPod("b", "train")
			failed.Status.Phase = v1.PodFailed
			pods.OnUpdate(gangPod("b", "train"), failed)
			pods.OnDelete(cache.DeletedFinalStateUnknown{Key: "ml/b", Obj: failed})
			pods.OnAdd(gangPod("c", "train"), false)
		}, 1},
		{"the PodGroup created after its pods", func(pods, groups cache.ResourceEventHandler) {
			pods.OnAdd(gangPod("a", "train"), false)
			pods.OnAdd(gangPod("b", "train"), false)
			groups.OnAdd(podGroup("train", 2), false)
		}, 1},
		{"a complete gang in the initial lists: the first loop reads it", func(pods, groups cache.ResourceEventHandler) {
			pods.OnAdd(gangPod("a", "train"), true)
			groups.OnAdd(podGroup("train", 1), true)
			groups.OnUpdate(podGroup("train", 1), podGroup("train", 1))
		}, 0},
		{"minCount lowered to the pods there are", func(pods, groups cache.ResourceEventHandler) {
			groups.OnAdd(podGroup("train", 4), false)
			pods.OnAdd(gangPod("a", "train"), false)
			pods.OnAdd(gangPod("b", "train"), false)
			groups.OnUpdate(podGroup("train", 4), podGroup("train", 2))
		}, 1},
		{"a PodGroup without a gang policy", func(pods, groups cache.ResourceEventHandler) {
			pg := podGroup("train", 1)
			pg.Spec.SchedulingPolicy.Gang = nil
			groups.OnAdd(pg, false)
			pods.OnAdd(gangPod("a", "train"), false)
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			trig := newTrigger()
			g := NewGangs(trig)
			tc.send(g.Pods(), g.PodGroups())
			if got := events(trig, KindGangComplete); got != tc.want {
				t.Errorf("%d events, want %d", got, tc.want)
			}
		})
	}
}
