package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/drainability"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/scaledown"
)

// sdEnv is a fake API server with CPU nodes of one mocked group "cpu"
// (nodes whose name starts with "other-" belong to no group).
type sdEnv struct {
	a        *Autoscaler
	client   *fake.Clientset
	group    *mocks.MockNodeGroup
	recorder *record.FakeRecorder
	now      time.Time
	mu       sync.Mutex
}

func cpuNode(name string) *v1.Node {
	n := fx.Node(name, 8, 32, nil)
	n.CreationTimestamp = metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return n
}

// rsPod is a running ReplicaSet pod of milliCPU on node.
func rsPod(name, node string, milliCPU int64) *v1.Pod {
	p := fx.Pod(name, milliCPU, nil)
	p.Spec.NodeName = node
	p.Status.Phase = v1.PodRunning
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
	return p
}

func withTaint(n *v1.Node, key string, effect v1.TaintEffect) *v1.Node {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: "1700000000", Effect: effect})
	return n
}

func newSDEnv(t *testing.T, act ScaleDownActuation, objs ...runtime.Object) *sdEnv {
	t.Helper()
	return newSDEnvDryRun(t, act, false, objs...)
}

func newSDEnvDryRun(t *testing.T, act ScaleDownActuation, dryRun bool, objs ...runtime.Object) *sdEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	client := fake.NewClientset(objs...)
	// Evictions delete the pod at once, as a pod with no grace period.
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ca := action.(k8stesting.CreateAction)
		name := ca.GetObject().(metav1.Object).GetName()
		return true, nil, client.Tracker().Delete(podsGVR, action.GetNamespace(), name)
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	startWatched(ctx, t, client, factory, "nodes", "pods")

	group := mocks.NewMockNodeGroup(ctrl)
	expectFlagOptions(group)
	group.EXPECT().Id().Return("cpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(10).AnyTimes()
	group.EXPECT().TargetSize().Return(0, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(cpuNode("template"), nil, nil).AnyTimes()
	group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).DoAndReturn(func(n *v1.Node) (cloudprovider.NodeGroup, error) {
		if strings.HasPrefix(n.Name, "other-") {
			return nil, nil
		}
		return group, nil
	}).AnyTimes()
	if act.PodGonePollInterval == 0 {
		act.PodGonePollInterval = 5 * time.Millisecond
	}
	if act.MaxGracefulTermination == 0 {
		act.MaxGracefulTermination = 10 * time.Second
	}
	act.Drainability = drainability.DefaultOptions()
	e := &sdEnv{client: client, group: group, recorder: record.NewFakeRecorder(1000), now: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	e.a = New(Config{Client: client, View: listers, Provider: provider, Recorder: e.recorder, Now: e.clock, DryRun: dryRun,
		StatusNamespace: "kube-system", StatusName: DryRunStatusConfigMapName,
		ScaleDown: ScaleDownConfig{Enabled: true, UtilizationThreshold: 0.5, ScaleDownActuation: act}})
	return e
}

var podsGVR = v1.SchemeGroupVersion.WithResource("pods")

func (e *sdEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *sdEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// loop runs one loop, waits for the removals it started, and for the
// informers to see what they changed.
func (e *sdEnv) loop(t *testing.T) *LoopResult {
	t.Helper()
	res, err := e.a.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	e.a.waitForDrains()
	e.sync(t)
	return res
}

// sync waits until the node lister matches the API server.
func (e *sdEnv) sync(t *testing.T) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		cached, _ := e.a.cfg.View.Nodes.List(labelsEverything())
		if len(cached) != len(list.Items) {
			return false, nil
		}
		for _, n := range list.Items {
			c, err := e.a.cfg.View.Nodes.Get(n.Name)
			// The fake clientset leaves resource versions empty: compare
			// what the loop reads (taints, annotations) too.
			if err != nil || c.ResourceVersion != n.ResourceVersion || !apiequality.Semantic.DeepEqual(c.Spec, n.Spec) ||
				!apiequality.Semantic.DeepEqual(c.Annotations, n.Annotations) {
				return false, nil
			}
		}
		pods, _ := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		cachedPods, _ := e.a.cfg.View.Pods.List(labelsEverything())
		return len(pods.Items) == len(cachedPods), nil
	})
	if err != nil {
		t.Fatalf("informers did not catch up: %v", err)
	}
}

// deleteNodeObjects makes DeleteNodes remove the Node, as a provider does.
func (e *sdEnv) deleteNodeObjects(times int) *gomock.Call {
	return e.group.EXPECT().DeleteNodes(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, nodes []*v1.Node) error {
		for _, n := range nodes {
			if err := e.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
		return nil
	}).Times(times)
}

func (e *sdEnv) taints(t *testing.T, node string) map[string]v1.Taint {
	t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Taint{}
	for _, tt := range n.Spec.Taints {
		out[tt.Key] = tt
	}
	return out
}

// Both nodes of a batch are tainted ToBeDeletedByClusterAutoscaler
// before the first pod is evicted, so no evicted pod lands on the other.
func TestBatchTaintedBeforeFirstEviction(t *testing.T) {
	e := newSDEnv(t, ScaleDownActuation{MaxDrainParallelism: 2},
		cpuNode("keep"), cpuNode("light-a"), cpuNode("light-b"),
		rsPod("big", "keep", 5000), rsPod("a", "light-a", 1000), rsPod("b", "light-b", 1000))
	e.deleteNodeObjects(2)
	res := e.loop(t)
	if strings.Join(res.Removed, ",") != "light-a,light-b" {
		t.Fatalf("removed %v, want both light nodes in one batch", res.Removed)
	}
	firstEviction, tainted := -1, map[string]int{}
	for i, act := range e.client.Actions() {
		if act.GetVerb() == "create" && act.GetSubresource() == "eviction" && firstEviction < 0 {
			firstEviction = i
		}
		if u, ok := act.(k8stesting.UpdateAction); ok && act.GetResource().Resource == "nodes" {
			n := u.GetObject().(*v1.Node)
			for _, tt := range n.Spec.Taints {
				if tt.Key == ToBeDeletedTaint && tt.Effect == v1.TaintEffectNoSchedule {
					if _, seen := tainted[n.Name]; !seen {
						tainted[n.Name] = i
					}
				}
			}
		}
	}
	if firstEviction < 0 {
		t.Fatal("no eviction")
	}
	for _, n := range []string{"light-a", "light-b"} {
		i, ok := tainted[n]
		if !ok || i > firstEviction {
			t.Errorf("node %s tainted at action %d (found %v), first eviction at %d: want every node of the batch tainted first", n, i, ok, firstEviction)
		}
	}
	if _, ok := e.taints(t, "keep")[ToBeDeletedTaint]; ok {
		t.Error("the node that stays got the ToBeDeleted taint")
	}
}

// At start-up, ToBeDeleted taints left on this autoscaler's nodes by a
// killed process are removed (with a ClusterAutoscalerCleanup event);
// nodes of no group are left alone.
func TestStaleTaintsRemovedAtStart(t *testing.T) {
	e := newSDEnv(t, ScaleDownActuation{},
		withTaint(cpuNode("busy"), ToBeDeletedTaint, v1.TaintEffectNoSchedule), rsPod("p", "busy", 6000),
		withTaint(cpuNode("other-x"), ToBeDeletedTaint, v1.TaintEffectNoSchedule))
	e.loop(t)
	if _, ok := e.taints(t, "busy")[ToBeDeletedTaint]; ok {
		t.Error("stale ToBeDeleted taint still on node busy")
	}
	if _, ok := e.taints(t, "other-x")[ToBeDeletedTaint]; !ok {
		t.Error("taint removed from a node of no group (another autoscaler's)")
	}
	found := false
	for _, ev := range events(e.recorder) {
		found = found || strings.Contains(ev, EventCleanup)
	}
	if !found {
		t.Error("no ClusterAutoscalerCleanup event")
	}
}

// DeletionCandidate taints go on unneeded nodes and come off when the
// node is needed again.
func TestDeletionCandidateTaint(t *testing.T) {
	e := newSDEnv(t, ScaleDownActuation{},
		cpuNode("keep"), cpuNode("light"), rsPod("big", "keep", 5000), rsPod("a", "light", 1000))
	e.a.cfg.ScaleDown.UnneededTime = time.Hour
	e.loop(t)
	tt, ok := e.taints(t, "light")[DeletionCandidateTaint]
	if !ok || tt.Effect != v1.TaintEffectPreferNoSchedule || tt.Value != "1769904000" {
		t.Fatalf("light taints %+v, want %s PreferNoSchedule valued with the Unix time", e.taints(t, "light"), DeletionCandidateTaint)
	}
	if _, ok := e.taints(t, "keep")[DeletionCandidateTaint]; ok {
		t.Fatal("busy node marked as a deletion candidate")
	}
	// More pods arrive on the light node: it is needed again.
	if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), rsPod("c", "light", 4000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	e.loop(t)
	if _, ok := e.taints(t, "light")[DeletionCandidateTaint]; ok {
		t.Error("candidate taint stays on a node no longer unneeded")
	}
}

// As CA's --max-bulk-soft-taint-count: a loop changes the candidate taint
// of at most so many nodes, taking it off needed nodes first; the rest
// follow in later loops, and a negative count (the flag's 0) changes none.
func TestSoftTaintBudget(t *testing.T) {
	tainted := func(e *sdEnv, names ...string) []string {
		var out []string
		for _, n := range names {
			if _, ok := e.taints(t, n)[DeletionCandidateTaint]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	e := newSDEnv(t, ScaleDownActuation{MaxBulkSoftTaintCount: 2},
		cpuNode("keep"), rsPod("big", "keep", 5000), cpuNode("e0"), cpuNode("e1"), cpuNode("e2"))
	e.a.cfg.ScaleDown.UnneededTime = time.Hour
	e.loop(t)
	if got := tainted(e, "e0", "e1", "e2"); !slices.Equal(got, []string{"e0", "e1"}) {
		t.Fatalf("after one loop with a budget of 2, tainted %v, want [e0 e1]", got)
	}
	e.loop(t)
	if got := tainted(e, "e0", "e1", "e2"); len(got) != 3 {
		t.Fatalf("after two loops, tainted %v, want all three", got)
	}
	// e0..e2 fill up and a new empty node appears: the budget goes to
	// taking the taint off first.
	for i, n := range []string{"e0", "e1", "e2"} {
		if _, err := e.client.CoreV1().Pods("default").Create(context.Background(), rsPod(fmt.Sprintf("fill-%d", i), n, 5000), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), cpuNode("e3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	e.loop(t)
	if got := tainted(e, "e0", "e1", "e2", "e3"); !slices.Equal(got, []string{"e2"}) {
		t.Fatalf("tainted %v, want [e2]: the budget takes the taint off e0 and e1 before tainting e3", got)
	}

	off := newSDEnv(t, ScaleDownActuation{MaxBulkSoftTaintCount: -1}, cpuNode("keep"), rsPod("big", "keep", 5000), cpuNode("e0"))
	off.a.cfg.ScaleDown.UnneededTime = time.Hour
	off.loop(t)
	if got := tainted(off, "e0"); len(got) != 0 {
		t.Errorf("with no soft-taint budget, tainted %v", got)
	}
}

// A taint written from the informer's copy of a node that has changed
// since fails with a conflict and is written again on the API server's
// node: what changed meanwhile is kept.
func TestTaintFromStaleCopyKeepsConcurrentChanges(t *testing.T) {
	stale := cpuNode("n")
	stale.ResourceVersion = "1"
	current := withTaint(cpuNode("n"), "example.com/maintenance", v1.TaintEffectNoSchedule)
	current.ResourceVersion = "2"
	e := newSDEnv(t, ScaleDownActuation{}, current)
	conflicts := 0
	e.client.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		n := action.(k8stesting.UpdateAction).GetObject().(*v1.Node)
		if n.ResourceVersion != "2" {
			conflicts++
			return true, nil, apierrors.NewConflict(v1.Resource("nodes"), n.Name, errors.New("stale resourceVersion"))
		}
		return false, nil, nil
	})
	if _, err := e.a.setTaintFrom(context.Background(), stale, ToBeDeletedTaint, v1.TaintEffectNoSchedule, true); err != nil {
		t.Fatal(err)
	}
	got := e.taints(t, "n")
	if _, ok := got[ToBeDeletedTaint]; !ok || conflicts != 1 {
		t.Fatalf("taints %v after %d conflicts, want %s after one", got, conflicts, ToBeDeletedTaint)
	}
	if _, ok := got["example.com/maintenance"]; !ok {
		t.Errorf("taints %v: the taint added since the cached copy was lost", got)
	}
}

// The node is deleted only after its evicted pod has terminated.
func TestNodeDeletedAfterEvictedPodsTerminate(t *testing.T) {
	tests := []struct {
		name            string
		podGoes         bool
		maxGraceful     time.Duration
		wantPodGoneSeen bool
	}{
		{name: "pod terminates after a few polls", podGoes: true, maxGraceful: time.Minute, wantPodGoneSeen: true},
		{name: "pod never terminates: deleted after max-graceful-termination", podGoes: false, maxGraceful: 50 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSDEnv(t, ScaleDownActuation{MaxGracefulTermination: tc.maxGraceful},
				cpuNode("keep"), cpuNode("light"), rsPod("big", "keep", 5000), rsPod("a", "light", 1000))
			// Eviction only marks the pod terminating; it goes several
			// polls later (or never).
			e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				if tc.podGoes {
					time.AfterFunc(10*e.a.cfg.ScaleDown.PodGonePollInterval, func() {
						_ = e.client.Tracker().Delete(podsGVR, "default", "a")
					})
				}
				return true, nil, nil
			})
			podGoneAtDelete := false
			e.group.EXPECT().DeleteNodes(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, nodes []*v1.Node) error {
				_, err := e.client.Tracker().Get(podsGVR, "default", "a")
				podGoneAtDelete = apierrors.IsNotFound(err)
				return nil
			})
			e.loop(t)
			if podGoneAtDelete != tc.wantPodGoneSeen {
				t.Errorf("pod gone when the node was deleted = %v, want %v", podGoneAtDelete, tc.wantPodGoneSeen)
			}
		})
	}
}

// --scale-down-delay-after-delete and --scale-down-delay-after-failure
// hold the next removal.
func TestScaleDownDelays(t *testing.T) {
	tests := []struct {
		name       string
		act        ScaleDownActuation
		deleteErr  error
		delay      time.Duration
		wantSecond string // removal started after the delay
	}{
		{name: "after delete", act: ScaleDownActuation{DelayAfterDelete: 5 * time.Minute}, delay: 5 * time.Minute, wantSecond: "light-b"},
		// The failed attempt evicted light-a's pod: light-a is empty now and
		// goes with light-b in one batch.
		{name: "after failure", act: ScaleDownActuation{DelayAfterFailure: 3 * time.Minute}, deleteErr: errors.New("cloud says no"),
			delay: 3 * time.Minute, wantSecond: "light-a,light-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSDEnv(t, tc.act, cpuNode("keep"), cpuNode("light-a"), cpuNode("light-b"),
				rsPod("big", "keep", 5000), rsPod("a", "light-a", 1000), rsPod("b", "light-b", 1000))
			if tc.deleteErr != nil {
				e.group.EXPECT().DeleteNodes(gomock.Any(), gomock.Any()).Return(tc.deleteErr).Times(3)
			} else {
				e.deleteNodeObjects(2)
			}
			if res := e.loop(t); strings.Join(res.Removed, ",") != "light-a" {
				t.Fatalf("first loop removed %v, want light-a (one drain at a time)", res.Removed)
			}
			if tc.deleteErr != nil {
				if _, ok := e.taints(t, "light-a")[ToBeDeletedTaint]; ok {
					t.Error("ToBeDeleted taint stays after the removal failed")
				}
				found := false
				for _, ev := range events(e.recorder) {
					found = found || (strings.Contains(ev, EventScaleDownFailed) && strings.Contains(ev, "cloud says no"))
				}
				if !found {
					t.Error("no ScaleDownFailed event with the provider's error")
				}
			}
			e.advance(tc.delay - time.Second)
			if res := e.loop(t); len(res.Removed) != 0 {
				t.Fatalf("removed %v within the delay", res.Removed)
			}
			e.advance(time.Second)
			if res := e.loop(t); strings.Join(res.Removed, ",") != tc.wantSecond {
				t.Fatalf("after the delay removed %v, want %s", res.Removed, tc.wantSecond)
			}
		})
	}
}

// A node unready for --scale-down-unready-time goes whatever its use; one
// unready for less stays.
func TestUnreadyNodeRemovedAfterUnreadyTime(t *testing.T) {
	unready := func(name string, since time.Duration, now time.Time) *v1.Node {
		n := cpuNode(name)
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.Time{Time: now.Add(-since)}}}
		return n
	}
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	e := newSDEnv(t, ScaleDownActuation{UnreadyTime: 20 * time.Minute},
		cpuNode("keep"), rsPod("big", "keep", 7000),
		unready("dead-long", 30*time.Minute, now), unready("dead-short", 10*time.Minute, now))
	e.deleteNodeObjects(1)
	if res := e.loop(t); strings.Join(res.Removed, ",") != "dead-long" {
		t.Fatalf("removed %v, want dead-long only", res.Removed)
	}
}

// Nodes kept by the drain rules say why in the status ConfigMap and in a
// NoScaleDown event, once per reason.
func TestBlockedNodeReason(t *testing.T) {
	noEvict := rsPod("db", "light", 1000)
	noEvict.Annotations = map[string]string{drainability.SafeToEvictAnnotation: "false"}
	disabled := cpuNode("pinned")
	disabled.Annotations = map[string]string{drainability.ScaleDownDisabledAnnotation: "true"}
	e := newSDEnv(t, ScaleDownActuation{}, cpuNode("keep"), cpuNode("light"), disabled, rsPod("big", "keep", 5000), noEvict)
	e.a.cfg.StatusNamespace, e.a.cfg.StatusName = "kube-system", "status"
	e.loop(t)
	e.loop(t)
	_, d := readStatus(t, e.a)
	kept := map[string]DraxrUnremovableNode{}
	for _, u := range d.UnremovableNodes {
		kept[u.Node] = u
	}
	if u := kept["light"]; u.Reason != "BlockedByPod" || !strings.Contains(u.Message, "NotSafeToEvictAnnotation") {
		t.Errorf("unremovable light = %+v, want BlockedByPod: NotSafeToEvictAnnotation", u)
	}
	if u := kept["pinned"]; u.Reason != "ScaleDownDisabledAnnotation" {
		t.Errorf("unremovable pinned = %+v, want ScaleDownDisabledAnnotation", u)
	}
	if got := scrape(t, "cluster_autoscaler_unremovable_nodes_count", map[string]string{"reason": "BlockedByPod"}); got != 1 {
		t.Errorf("unremovable_nodes_count{reason=BlockedByPod} = %v, want 1", got)
	}
	count := map[string]int{}
	for _, ev := range events(e.recorder) {
		if strings.Contains(ev, EventNoScaleDown) {
			for _, r := range []string{"BlockedByPod: NotSafeToEvictAnnotation", "ScaleDownDisabledAnnotation"} {
				if strings.Contains(ev, r) {
					count[r]++
				}
			}
		}
	}
	if count["BlockedByPod: NotSafeToEvictAnnotation"] != 1 || count["ScaleDownDisabledAnnotation"] != 1 {
		t.Errorf("NoScaleDown events per reason = %v, want one each over two loops", count)
	}
}

func labelsEverything() labels.Selector { return labels.Everything() }

// --ignore-daemonsets-utilization reaches the loop: a node whose
// DaemonSet pod takes 3.5 of its 8 CPUs and whose workload takes 1 is
// needed at 56%, and unneeded at 1 of 4.5 CPUs (22%) with the flag.
func TestIgnoreDaemonSetsUtilization(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore=%v", ignore), func(t *testing.T) {
			agent := rsPod("agent", "light", 3500)
			agent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
			e := newSDEnv(t, ScaleDownActuation{},
				cpuNode("keep"), cpuNode("light"), rsPod("big", "keep", 5000), agent, rsPod("a", "light", 1000))
			e.a.cfg.ScaleDown.UnneededTime = time.Hour
			e.a.cfg.ScaleDown.UtilizationIgnores.DaemonSetPods = ignore
			res := e.loop(t)
			if got := slices.Contains(res.Unneeded, "light"); got != ignore {
				t.Fatalf("unneeded %v: want light unneeded %v", res.Unneeded, ignore)
			}
		})
	}
}

// As CA's planner, a loop looks for no more unneeded nodes than the next
// loops can remove: the ones found last loop plus twice
// --max-scale-down-parallelism. The others are kept with that reason (no
// NoScaleDown event: nothing keeps them), and last loop's unneeded nodes
// are looked at first, so their unneeded time keeps running.
func TestScaleDownStopsEarlyAsCA(t *testing.T) {
	objs := []runtime.Object{cpuNode("keep"), rsPod("big", "keep", 5000)}
	for _, n := range []string{"light-a", "light-b", "light-c", "light-d", "light-e"} {
		objs = append(objs, cpuNode(n), rsPod("p-"+n, n, 500))
	}
	e := newSDEnv(t, ScaleDownActuation{MaxScaleDownParallelism: 1}, objs...)
	e.a.cfg.ScaleDown.UnneededTime = 10 * time.Minute
	explain := func() (unneeded, notEvaluated []string) {
		t.Helper()
		verdicts, err := e.a.ExplainScaleDown(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range verdicts {
			switch {
			case v.Verdict == scaledown.Unneeded:
				unneeded = append(unneeded, v.Node)
			case v.Code == scaledown.NotEvaluated:
				if !strings.Contains(v.Reason, "--max-scale-down-parallelism 1") {
					t.Errorf("%s: reason %q does not name the flag", v.Node, v.Reason)
				}
				notEvaluated = append(notEvaluated, v.Node)
			}
		}
		return unneeded, notEvaluated
	}
	unneeded, skipped := explain()
	if len(unneeded) != 2 || len(skipped) != 3 {
		t.Fatalf("first loop: unneeded %v, not evaluated %v; want 2 and 3", unneeded, skipped)
	}
	first := map[string]time.Time{}
	for _, n := range unneeded {
		first[n] = e.a.unneededSince[n]
	}
	e.advance(10 * time.Second)
	unneeded, skipped = explain()
	if len(unneeded) != 4 || len(skipped) != 1 {
		t.Fatalf("second loop: unneeded %v, not evaluated %v; want 4 and 1", unneeded, skipped)
	}
	for n, since := range first {
		if got, ok := e.a.unneededSince[n]; !ok || !got.Equal(since) {
			t.Errorf("%s: unneeded since %v, want %v kept from the first loop", n, got, since)
		}
	}
	for _, ev := range events(e.recorder) {
		if strings.Contains(ev, EventNoScaleDown) {
			t.Errorf("event %q for a node only left unevaluated", ev)
		}
	}
}

// --scale-down-simulation-timeout ends the search: the candidates left
// are kept with that reason.
func TestScaleDownSimulationTimeout(t *testing.T) {
	e := newSDEnv(t, ScaleDownActuation{}, cpuNode("keep"), rsPod("big", "keep", 5000),
		cpuNode("light-a"), rsPod("a", "light-a", 500), cpuNode("light-b"), rsPod("b", "light-b", 500))
	e.a.cfg.ScaleDown.SimulationTimeout = time.Nanosecond
	verdicts, err := e.a.ExplainScaleDown(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range verdicts {
		if strings.HasPrefix(v.Node, "light-") && (v.Code != scaledown.NotEvaluated || !strings.Contains(v.Reason, "--scale-down-simulation-timeout")) {
			t.Errorf("%s: %s %s %q, want kept, not evaluated for the timeout", v.Node, v.Verdict, v.Code, v.Reason)
		}
	}
}

// A node that has just come up for a pending pod is not unneeded while
// the scheduler has yet to bind the pod there (CA's
// filter-out-schedulable runs before scale-down): the pod is placed in
// the simulation first.
func TestPendingPodKeepsTheNodeItFits(t *testing.T) {
	pending := fx.Pod("waiting", 4000, nil)
	pending.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
	pending.Status.Phase = v1.PodPending
	pending.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
	e := newSDEnv(t, ScaleDownActuation{}, cpuNode("keep"), rsPod("big", "keep", 7000), cpuNode("fresh"), pending)
	verdicts, err := e.a.ExplainScaleDown(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range verdicts {
		if v.Node == "fresh" && (v.Verdict == scaledown.Removable || v.Verdict == scaledown.Unneeded) {
			t.Errorf("fresh: %s (%s), want kept: the pending pod fits only there", v.Verdict, v.Reason)
		}
	}
}

// A node the scheduler is binding a pod to (the pod's devices allocated
// there, the pod not bound yet) holds no bound pod but is not empty: it
// stays, and says which pod keeps it, though another node has room for
// the pod.
func TestNodeReceivingPodIsKept(t *testing.T) {
	binding := fx.Pod("binding", 1000, nil)
	binding.UID = "uid-binding"
	binding.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
	binding.Status.Phase = v1.PodPending
	binding.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
	claim := fx.Claim("binding-extended-resources-abc", "gpu.example.com", 1)
	claim.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"fresh"}}}}}}}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: binding.Name, UID: binding.UID}}
	e := newSDEnv(t, ScaleDownActuation{}, cpuNode("fresh"), cpuNode("busy"), rsPod("big", "busy", 5000), binding, claim)
	e.group.EXPECT().DeleteNodes(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, nodes []*v1.Node) error {
		for _, n := range nodes {
			if n.Name == "fresh" {
				t.Errorf("node fresh deleted while the scheduler binds default/binding to it")
			}
		}
		return nil
	}).AnyTimes()
	res := e.loop(t)
	var fresh *scaledown.NodeVerdict
	for i, v := range res.ScaleDown {
		if v.Node == "fresh" {
			fresh = &res.ScaleDown[i]
		}
	}
	if fresh == nil || fresh.Verdict != scaledown.Kept || fresh.Code != "BlockedByPod" || !strings.Contains(fresh.Reason, "default/binding") {
		t.Errorf("fresh: %+v, want Kept, BlockedByPod naming default/binding", fresh)
	}
}
