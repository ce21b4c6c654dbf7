package checker

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const user = "system:serviceaccount:kube-system:draxr-autoscaler"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func config() Config {
	return Config{
		Groups: []Group{
			{Name: "gpu", Min: 0, Max: 2},
			{Name: "base", Min: 1, Max: 3},
			{Name: "broken", Max: 5, Faulty: true},
		},
		GroupLabel:     "group",
		AutoscalerUser: user,
		Demand: func(p *v1.Pod) map[string]int64 {
			if p.Labels["gpus"] == "" {
				return map[string]int64{"cpu": 1}
			}
			return map[string]int64{"cpu": 1, "gpu": int64(len(p.Labels["gpus"]))}
		},
		Capacity: func(group string, published bool) map[string]int64 {
			out := map[string]int64{"cpu": 32}
			if group != "base" && published {
				out["gpu"] = 4
			}
			return out
		},
		ScanInterval: time.Second, ProvisionTimeout: 10 * time.Second, NodeStartup: 3 * time.Second,
		Settle: 3 * time.Second, RestartGrace: 10 * time.Second, StartupGrace: 5 * time.Second, Resync: 10 * time.Second,
		LeaderActiveWithin: 3 * time.Second,
	}
}

func node(name, group string, ready bool, taints ...string) *v1.Node {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"group": group}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status}}}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectNoSchedule})
	}
	return n
}

// pod is a ReplicaSet's pod asking for len(gpus) GPUs, bound to nodeName.
func pod(ns, name, nodeName, gpus string, change ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
		Labels:          map[string]string{"gpus": gpus, "app": name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{NodeName: nodeName}}
	for _, f := range change {
		f(p)
	}
	return p
}

func podObs(s float64, p *v1.Pod) Observation {
	return Observation{Time: at(s), Kind: PodUpdate, Pod: p}
}
func nodeObs(s float64, n *v1.Node) Observation {
	return Observation{Time: at(s), Kind: NodeUpdate, Node: n}
}
func call(s float64, verb, resource, sub, ns, name string) Observation {
	return Observation{Time: at(s), Kind: APICall, Call: &Call{User: user, Verb: verb, Resource: resource, Subresource: sub, Namespace: ns, Name: name, Code: 200}}
}
func tick(s float64) Observation { return Observation{Time: at(s), Kind: Tick} }

// expect runs the observations and wants exactly the listed invariants
// broken (none when empty), each inv checked at least once.
func expect(t *testing.T, obs []Observation, checked Invariant, broken ...Invariant) []Violation {
	t.Helper()
	got, counts := Run(config(), obs)
	if counts[checked] == 0 {
		t.Errorf("%s never checked: %v", checked, counts)
	}
	var names []string
	for _, v := range got {
		names = append(names, string(v.Invariant))
	}
	var want []string
	for _, inv := range broken {
		want = append(want, string(inv))
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("violations %v, want %v:\n%v", names, want, got)
	}
	return got
}

func TestPodDeletionAllowed(t *testing.T) {
	base := []Observation{nodeObs(0, node("gpu-0", "gpu", true))}
	cases := []struct {
		name    string
		pod     *v1.Pod
		pdb     *policyv1.PodDisruptionBudget
		allowed bool
		reason  string
	}{
		{name: "replica set pod", pod: pod("a", "p", "gpu-0", "x"), allowed: true},
		{name: "safe-to-evict false", pod: pod("a", "p", "gpu-0", "x", func(p *v1.Pod) {
			p.Annotations = map[string]string{SafeToEvictAnnotation: "false"}
		}), reason: "safe-to-evict=false"},
		{name: "local storage", pod: pod("a", "p", "gpu-0", "x", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		}), reason: "local storage"},
		{name: "local storage allowed by annotation", pod: pod("a", "p", "gpu-0", "x", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Annotations = map[string]string{SafeToEvictLocalVolumesAnnotation: "scratch"}
		}), allowed: true},
		{name: "no controller", pod: pod("a", "p", "gpu-0", "x", func(p *v1.Pod) { p.OwnerReferences = nil }), reason: "no controller"},
		{name: "kube-system", pod: pod("kube-system", "p", "gpu-0", "x"), reason: "kube-system"},
		{name: "PDB allowing none", pod: pod("a", "p", "gpu-0", "x"), reason: "PodDisruptionBudget",
			pdb: &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "keep"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}}}}},
		{name: "PDB allowing one", pod: pod("a", "p", "gpu-0", "x"), allowed: true,
			pdb: &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "keep"},
				Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}}},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}},
		{name: "finished pod", pod: pod("a", "p", "gpu-0", "x", func(p *v1.Pod) {
			p.OwnerReferences, p.Status.Phase = nil, v1.PodSucceeded
		}), allowed: true},
	}
	for _, tc := range cases {
		for _, verb := range []string{"delete", "evict"} {
			t.Run(tc.name+"/"+verb, func(t *testing.T) {
				obs := append(append([]Observation{}, base...), podObs(1, tc.pod))
				if tc.pdb != nil {
					obs = append(obs, Observation{Time: at(1), Kind: PDBUpdate, PDB: tc.pdb})
				}
				if verb == "delete" {
					obs = append(obs, call(5, "delete", "pods", "", tc.pod.Namespace, tc.pod.Name))
				} else {
					obs = append(obs, call(5, "create", "pods", "eviction", tc.pod.Namespace, tc.pod.Name))
				}
				if tc.allowed {
					expect(t, obs, PodDeletionAllowed)
					return
				}
				v := expect(t, obs, PodDeletionAllowed, PodDeletionAllowed)
				if len(v) == 1 && !strings.Contains(v[0].Message, tc.reason) {
					t.Errorf("message %q does not say %q", v[0].Message, tc.reason)
				}
			})
		}
	}
	t.Run("someone else's deletion is not judged", func(t *testing.T) {
		obs := append(append([]Observation{}, base...), podObs(1, pod("kube-system", "p", "gpu-0", "x")))
		c := call(5, "delete", "pods", "", "kube-system", "p")
		c.Call.User = "admin"
		got, _ := Run(config(), append(obs, c))
		if len(got) != 0 {
			t.Errorf("violations %v, want none", got)
		}
	})
	t.Run("a refused eviction is no removal", func(t *testing.T) {
		obs := append(append([]Observation{}, base...), podObs(1, pod("kube-system", "p", "gpu-0", "x")))
		c := call(5, "create", "pods", "eviction", "kube-system", "p")
		c.Call.Code = 429
		got, _ := Run(config(), append(obs, c))
		if len(got) != 0 {
			t.Errorf("violations %v, want none", got)
		}
	})
}

func TestNodeRemovalEvictable(t *testing.T) {
	obs := []Observation{
		nodeObs(0, node("base-0", "base", true)), nodeObs(0, node("base-1", "base", true)),
		podObs(1, pod("a", "free", "base-0", "")),
		podObs(1, pod("a", "bare", "base-1", "", func(p *v1.Pod) { p.OwnerReferences = nil })),
	}
	expect(t, append(obs, call(5, "delete", "nodes", "", "", "base-0")), NodeRemovalEvictable)
	v := expect(t, append(obs, call(5, "delete", "nodes", "", "", "base-1")), NodeRemovalEvictable, NodeRemovalEvictable)
	if len(v) == 1 && !strings.Contains(v[0].Message, "a/bare: no controller") {
		t.Errorf("message %q does not name the pod and rule", v[0].Message)
	}
	// A pod the autoscaler deleted on the way counts against the node too.
	withDelete := append(append([]Observation{}, obs...), call(4, "delete", "pods", "", "a", "bare"), call(5, "delete", "nodes", "", "", "base-1"))
	expect(t, withDelete, NodeRemovalEvictable, PodDeletionAllowed, NodeRemovalEvictable)
}

func TestGroupWithinMax(t *testing.T) {
	obs := []Observation{nodeObs(0, node("gpu-0", "gpu", false)), nodeObs(1, node("gpu-1", "gpu", false))}
	expect(t, obs, GroupWithinMax)
	expect(t, append(obs, nodeObs(2, node("gpu-2", "gpu", false))), GroupWithinMax, GroupWithinMax)
	// A removed node makes room.
	expect(t, append(obs, Observation{Time: at(2), Kind: NodeDelete, Name: "gpu-0"}, nodeObs(3, node("gpu-2", "gpu", false))), GroupWithinMax)
}

func TestGroupAtLeastMin(t *testing.T) {
	obs := []Observation{nodeObs(0, node("base-0", "base", true)), nodeObs(0, node("base-1", "base", true))}
	expect(t, append(obs, call(5, "delete", "nodes", "", "", "base-0")), GroupAtLeastMin)
	expect(t, append(obs, call(5, "delete", "nodes", "", "", "base-0"), call(6, "delete", "nodes", "", "", "base-1")),
		GroupAtLeastMin, GroupAtLeastMin)
}

func TestNoScaleUpWithRoom(t *testing.T) {
	ready := []Observation{
		nodeObs(0, node("gpu-0", "gpu", true)),
		{Time: at(0.5), Kind: SlicesPublished, Name: "gpu-0", Count: 1},
		podObs(1, pod("a", "busy", "gpu-0", "xxx")), // 3 of 4 GPUs used
	}
	scaleUp := Observation{Time: at(10), Kind: ScaleUpEvent, Name: "a/new"}
	// One GPU free: a 1-GPU pod had room, a 2-GPU pod had not.
	expect(t, append(append([]Observation{}, ready...), podObs(9, pod("a", "new", "", "x")), scaleUp), NoScaleUpWithRoom, NoScaleUpWithRoom)
	expect(t, append(append([]Observation{}, ready...), podObs(9, pod("a", "new", "", "xx")), scaleUp), NoScaleUpWithRoom)
	// Room that just appeared (a pod deleted a moment ago) is not held
	// against the autoscaler.
	recent := append(append([]Observation{}, ready...), podObs(9, pod("a", "new", "", "xx")),
		Observation{Time: at(9.5), Kind: PodDelete, Name: "a/busy"}, scaleUp)
	expect(t, recent, NoScaleUpWithRoom)
	// Nor are devices not yet published.
	unpublished := []Observation{nodeObs(0, node("gpu-0", "gpu", true)), podObs(9, pod("a", "new", "", "x")), scaleUp}
	expect(t, unpublished, NoScaleUpWithRoom)
	// Nor a node being deleted.
	tainted := []Observation{nodeObs(0, node("gpu-0", "gpu", true, ToBeDeletedTaint)),
		{Time: at(0.5), Kind: SlicesPublished, Name: "gpu-0", Count: 1}, podObs(9, pod("a", "new", "", "x")), scaleUp}
	expect(t, tainted, NoScaleUpWithRoom)
}

func TestScaleUpWithinPending(t *testing.T) {
	obs := []Observation{podObs(0, pod("a", "p1", "", "x")), podObs(0, pod("a", "p2", "", "x"))}
	two := append(append([]Observation{}, obs...), call(1, "create", "nodes", "", "", "gpu-0"), call(1.1, "create", "nodes", "", "", "gpu-1"))
	expect(t, append(two, tick(5)), ScaleUpWithinPending)
	three := append(append([]Observation{}, two...), call(1.2, "create", "nodes", "", "", "gpu-2"))
	// Judged once Settle (3s) has passed, not before.
	if v, _ := Run(config(), append(three[:len(three):len(three)], tick(3))); len(v) != 0 {
		t.Errorf("judged before Settle: %v", v)
	}
	expect(t, append(three, tick(5)), ScaleUpWithinPending, ScaleUpWithinPending)
	// A pod the soak sees only after the node's creation still counts.
	late := []Observation{podObs(0, pod("a", "p1", "", "x")), call(1, "create", "nodes", "", "", "gpu-0"),
		call(1.1, "create", "nodes", "", "", "gpu-1"), podObs(2, pod("a", "p2", "", "x")), tick(5)}
	expect(t, late, ScaleUpWithinPending)
	// Only pods that fit count: a 5-GPU pod fits no group.
	big := []Observation{podObs(0, pod("a", "huge", "", "xxxxx")), call(1, "create", "nodes", "", "", "gpu-0"), tick(5)}
	expect(t, big, ScaleUpWithinPending, ScaleUpWithinPending)
	// A pod bound long before does not excuse a new node.
	old := []Observation{podObs(0, pod("a", "p1", "", "x")), podObs(1, pod("a", "p1", "gpu-9", "x")),
		call(20, "create", "nodes", "", "", "gpu-0"), tick(25)}
	expect(t, old, ScaleUpWithinPending, ScaleUpWithinPending)
	// While the soak's view may be stale (an API server restart and
	// Resync after), scale-ups are not judged.
	stale := []Observation{{Time: at(0), Kind: DisruptionStart, Name: "apiserver"}, {Time: at(1), Kind: DisruptionEnd, Name: "apiserver"},
		call(2, "create", "nodes", "", "", "gpu-0"), tick(10), call(30, "create", "nodes", "", "", "gpu-1"), tick(40)}
	got, counts := Run(config(), stale)
	if len(got) != 1 || counts[ScaleUpWithinPending] != 1 || !strings.Contains(got[0].Message, "gpu-1") {
		t.Errorf("stale view: violations %v, counts %v; want only gpu-1's creation judged and failed", got, counts[ScaleUpWithinPending])
	}
}

func TestPendingBounded(t *testing.T) {
	// bound: 10s provision timeout + 2 loops of 1s + 3s startup = 15s.
	p := podObs(0, pod("a", "p", "", "x"))
	expect(t, []Observation{p, tick(14), podObs(14.5, pod("a", "p", "gpu-0", "x"))}, PendingBounded)
	expect(t, []Observation{p, tick(14), tick(16)}, PendingBounded, PendingBounded)
	// No group can take a 5-GPU pod: waiting is not the autoscaler's fault.
	huge := podObs(0, pod("a", "huge", "", "xxxxx"))
	_, counts := Run(config(), []Observation{huge, tick(100)})
	if v, _ := Run(config(), []Observation{huge, tick(100)}); len(v) != 0 || counts[PendingBounded] != 0 {
		t.Errorf("pod no group fits: violations %v", v)
	}
	// A group at max cannot take it either.
	full := []Observation{nodeObs(0, node("gpu-0", "gpu", false)), nodeObs(0, node("gpu-1", "gpu", false)), p, tick(30)}
	if v, _ := Run(config(), full); len(v) != 0 {
		t.Errorf("only group at max: violations %v", v)
	}
	// A disruption restarts the clock.
	disrupted := []Observation{p, {Time: at(5), Kind: DisruptionStart, Name: "kill"}, tick(12),
		{Time: at(13), Kind: DisruptionEnd, Name: "kill"}, tick(20), tick(27)}
	expect(t, append(disrupted[:len(disrupted):len(disrupted)], podObs(27.5, pod("a", "p", "gpu-0", "x"))), PendingBounded)
	expect(t, append(disrupted, tick(29)), PendingBounded, PendingBounded)
}

func TestDeletionTaintCleared(t *testing.T) {
	obs := []Observation{nodeObs(0, node("gpu-0", "gpu", true, ToBeDeletedTaint)), {Time: at(5), Kind: NewLeader, Name: "b"}}
	expect(t, append(append([]Observation{}, obs...), nodeObs(8, node("gpu-0", "gpu", true)), tick(20)), DeletionTaintCleared)
	expect(t, append(append([]Observation{}, obs...), call(8, "delete", "nodes", "", "", "gpu-0"), tick(20)), DeletionTaintCleared)
	expect(t, append(append([]Observation{}, obs...), tick(14)), DeletionTaintCleared)
	expect(t, append(append([]Observation{}, obs...), tick(16)), DeletionTaintCleared, DeletionTaintCleared)
	// Removed and set again by the new leader: a taint of its own.
	again := append(append([]Observation{}, obs...), nodeObs(8, node("gpu-0", "gpu", true)),
		nodeObs(9, node("gpu-0", "gpu", true, ToBeDeletedTaint)), tick(20))
	expect(t, again, DeletionTaintCleared)
}

func TestNoPanic(t *testing.T) {
	logObs := func(text string) []Observation {
		return []Observation{{Time: at(1), Kind: AutoscalerLog, Name: "a", Text: text}}
	}
	expect(t, logObs("I1126 01:02:03.000 loop.go:12] scale-up: no pending pods\n"), NoPanic)
	expect(t, logObs("I1126 loop\npanic: runtime error: index out of range [3] with length 3\n\ngoroutine 88 [running]:\n"), NoPanic, NoPanic)
	expect(t, logObs("fatal error: concurrent map writes\n"), NoPanic, NoPanic)
	// A recovered panic logged by the runtime's crash handler.
	expect(t, logObs(`E1126 01:02:03.000 runtime.go:79] Observed a panic: "invalid memory address" (runtime error: invalid memory address)`+"\n"), NoPanic, NoPanic)
}

func TestHealthyWhileLeaderHealthy(t *testing.T) {
	probe := func(s float64, ok bool, age time.Duration) Observation {
		return Observation{Time: at(s), Kind: HealthProbe, Probe: &Probe{Replica: "b", OK: ok, Age: age, Detail: "500"}}
	}
	active := Observation{Time: at(9), Kind: LeaderActivity}
	expect(t, []Observation{active, probe(10, true, time.Minute)}, HealthyWhileLeading)
	expect(t, []Observation{active, probe(10, false, time.Minute)}, HealthyWhileLeading, HealthyWhileLeading)
	// The leader itself has stopped: a failing check is right.
	expect(t, []Observation{active, probe(20, false, time.Minute)}, HealthyWhileLeading)
	// A replica just started may not serve yet.
	if v, _ := Run(config(), []Observation{active, probe(10, false, time.Second)}); len(v) != 0 {
		t.Errorf("young replica: violations %v", v)
	}
}
