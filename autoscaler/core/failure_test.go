package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/view"
	"draxr.dev/draxr/test/fakeprovider"
)

// failureEnv is the loop over a fake API server and the fault-injecting
// provider, on a clock the test moves.
type failureEnv struct {
	t        *testing.T
	ctx      context.Context
	a        *Autoscaler
	client   *fake.Clientset
	listers  view.View
	provider *fakeprovider.Provider
	recorder *record.FakeRecorder
	start    time.Time
	now      time.Time
}

// groupOf8GPUs is a group of nodes with 8 DRA GPUs and cpu cores: fewer
// cores waste less, so least-waste ranks it first.
func groupOf8GPUs(name string, cpu int64) *nodegroup.NodeGroup {
	return &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodegroup.Spec{MaxSize: 10,
		Template: *fx.Node("t", cpu, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}
}

func newFailureEnv(t *testing.T, objs ...runtime.Object) *failureEnv {
	t.Helper()
	e := &failureEnv{t: t, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), recorder: record.NewFakeRecorder(1000)}
	e.now = e.start
	objs = append(objs, fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	e.client = fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(e.client, 0)
	e.listers = liveview.FromInformers(f)
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		e.listers.PodGroups = f.Scheduling().V1beta1().PodGroups().Lister()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.ctx = ctx
	startWatched(ctx, t, e.client, f, "nodes", "resourceslices")
	e.provider = fakeprovider.New(e.client, func() time.Time { return e.now })
	exp, _ := expander.New("least-waste", nil, 1)
	e.a = New(Config{Client: e.client, View: e.listers, Provider: e.provider, Expander: exp, Recorder: e.recorder,
		StatusNamespace: "kube-system", StatusName: DefaultStatusConfigMapName, Now: func() time.Time { return e.now },
		ClusterState: &ClusterStateConfig{OkTotalUnreadyCount: 3, MaxTotalUnreadyPercentage: 45},
		ScaleDown:    ScaleDownConfig{Enabled: true, UtilizationThreshold: 0.5}})
	return e
}

// at moves the clock, lets the provider act and waits for the informers.
func (e *failureEnv) at(d time.Duration) {
	e.t.Helper()
	e.now = e.start.Add(d)
	if err := e.provider.Advance(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return e.provider.Synced(ctx, e.listers.Nodes, e.listers.Slices), nil
	})
	if err != nil {
		e.t.Fatal("informers did not catch up with the fake provider")
	}
}

func (e *failureEnv) events(reason string) []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			if strings.Contains(ev, " "+reason+" ") {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

// A group that fails is left for the next group the expander ranks, in
// the same loop when IncreaseSize fails, and once its nodes time out when
// they never come up.
func TestScaleUpFallsBackToTheNextGroup(t *testing.T) {
	tests := []struct {
		name      string
		faults    fakeprovider.Faults
		finalAt   time.Duration // the loop that must scale up "large"
		wantFirst string        // group the t0 loop scales up
		wantEvent string        // reason recorded by the final loop
		wantErr   string        // error of the t0 loop
	}{
		{name: "no fault: the preferred group grows (control)", wantFirst: "small", finalAt: -1},
		{name: "IncreaseSize out of resources: next group in the same loop",
			faults:    fakeprovider.Faults{IncreaseSizeErr: cloudprovider.OutOfResources("STOCKOUT", "no GPUs in zone a")},
			wantFirst: "large", finalAt: -1, wantEvent: clusterstate.EventFailedToScaleUpGroup,
			wantErr: "scale up node group small by 1: OutOfResource.STOCKOUT: no GPUs in zone a"},
		{name: "IncreaseSize other error: next group in the same loop",
			faults:    fakeprovider.Faults{IncreaseSizeErr: cloudprovider.NewError(cloudprovider.OtherErrorClass, "API", "internal error")},
			wantFirst: "large", finalAt: -1, wantEvent: clusterstate.EventFailedToScaleUpGroup, wantErr: "internal error"},
		{name: "nodes never register: given up after the provision time, pods go to the next group",
			faults: fakeprovider.Faults{NeverRegister: true}, wantFirst: "small", finalAt: 16 * time.Minute,
			wantEvent: clusterstate.EventScaleUpTimedOut},
		{name: "nodes register but never turn Ready: given up, pods go to the next group",
			faults: fakeprovider.Faults{NeverReady: true}, wantFirst: "small", finalAt: 16 * time.Minute,
			wantEvent: clusterstate.EventScaleUpTimedOut},
		{name: "instances in error: deleted, pods go to the next group",
			faults: fakeprovider.Faults{InstanceError: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass,
				ErrorCode: "QUOTA_EXCEEDED", ErrorMessage: "quota"}},
			wantFirst: "small", finalAt: time.Minute, wantEvent: clusterstate.EventScaleUpFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newFailureEnv(t, unschedulablePods(4)...)
			small := e.provider.AddGroup(groupOf8GPUs("small", 8), tc.faults)
			large := e.provider.AddGroup(groupOf8GPUs("large", 64), fakeprovider.Faults{})
			res, err := e.a.RunOnce(e.ctx)
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("t0 loop error = %v, want %q", err, tc.wantErr)
			}
			if res.ScaleUp == nil || res.ScaleUp.NodeGroup != tc.wantFirst || res.ScaleUp.NewNodes != 1 {
				t.Fatalf("t0 loop scale-up = %+v, want %s +1", res.ScaleUp, tc.wantFirst)
			}
			if tc.finalAt >= 0 {
				if tc.finalAt > 10*time.Minute {
					e.at(10 * time.Minute)
					res, err := e.a.RunOnce(e.ctx)
					if err != nil || res.ScaleUp != nil || len(res.GivenUp) != 0 {
						t.Fatalf("10m loop: %+v, %v; want waiting for the nodes, no error", res, err)
					}
				}
				e.at(tc.finalAt)
				res, err = e.a.RunOnce(e.ctx)
				if err != nil {
					t.Fatalf("final loop error: %v (a failing group must not fail the loop)", err)
				}
				if res.ScaleUp == nil || res.ScaleUp.NodeGroup != "large" {
					t.Fatalf("final loop scale-up = %+v, want large (small given up); loop %+v", res.ScaleUp, res)
				}
				if len(small.Names()) != 0 {
					t.Errorf("small still has %v, want its failed nodes given up", small.Names())
				}
			}
			if tc.wantEvent != "" {
				if evs := e.events(tc.wantEvent); len(evs) == 0 {
					t.Errorf("no %s event", tc.wantEvent)
				}
			}
			if tc.wantFirst == "small" && tc.finalAt < 0 && len(large.Increases()) != 0 {
				t.Errorf("large grew %v, want untouched", large.Increases())
			}
		})
	}
}

// Too many unready nodes make the cluster unhealthy: ClusterUnhealthy,
// scale-down pauses, scale-up of a healthy group goes on.
func TestUnhealthyClusterPausesScaleDownOnly(t *testing.T) {
	tests := []struct {
		unready     int
		wantHealthy bool
	}{
		{unready: 0, wantHealthy: true},
		{unready: 3, wantHealthy: true}, // --ok-total-unready-count
		{unready: 5, wantHealthy: false},
	}
	for _, tc := range tests {
		e := newFailureEnv(t, unschedulablePods(2)...)
		e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
		// cpu nodes have no GPUs: the pending pods never fit there, and
		// empty ones are unneeded.
		cpu := e.provider.AddGroup(&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
			Spec: nodegroup.Spec{MaxSize: 10, Template: *fx.Node("t", 8, 32, nil)}}, fakeprovider.Faults{})
		if err := cpu.AddReadyNodes(e.ctx, 6); err != nil {
			t.Fatal(err)
		}
		e.at(time.Hour)
		for _, name := range cpu.Names()[:tc.unready] {
			n, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Conditions[0].Status = v1.ConditionFalse
			n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(e.now)
			if _, err := e.client.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.at(time.Hour)
		res, err := e.a.RunOnce(e.ctx)
		if err != nil {
			t.Fatalf("%d unready: loop error %v", tc.unready, err)
		}
		if res.Healthy != tc.wantHealthy {
			t.Errorf("%d unready: healthy = %v, want %v", tc.unready, res.Healthy, tc.wantHealthy)
		}
		if res.ScaleUp == nil || res.ScaleUp.NodeGroup != "gpu" {
			t.Errorf("%d unready: scale-up = %+v, want gpu to grow either way", tc.unready, res.ScaleUp)
		}
		unhealthyEvents := e.events(clusterstate.EventClusterUnhealthy)
		if (len(unhealthyEvents) > 0) == tc.wantHealthy {
			t.Errorf("%d unready: ClusterUnhealthy events %v", tc.unready, unhealthyEvents)
		}
		// Next loop: the pods wait for the new node; scale-down's turn.
		res, err = e.a.RunOnce(e.ctx)
		if err != nil {
			t.Fatalf("%d unready: second loop error %v", tc.unready, err)
		}
		wantUnneeded := 0
		if tc.wantHealthy {
			wantUnneeded = 6 - tc.unready
		}
		if len(res.Unneeded) != wantUnneeded {
			t.Errorf("%d unready: unneeded %v, want %d (scale-down paused while unhealthy)", tc.unready, res.Unneeded, wantUnneeded)
		}
	}
}

// Scale-down moves a node's pods onto registered Ready nodes only, as CA
// does: a node still coming up may never arrive. Here gpu-0 runs two
// one-GPU pods (a quarter used) and the only room elsewhere is a node of
// group "slow" that was asked for but has not registered: gpu-0 is kept.
func TestScaleDownNeverDrainsOntoNodesStillComingUp(t *testing.T) {
	e := newFailureEnv(t)
	g := e.provider.AddGroup(groupOf8GPUs("gpu", 64), fakeprovider.Faults{})
	slow := e.provider.AddGroup(groupOf8GPUs("slow", 64), fakeprovider.Faults{NeverRegister: true})
	if err := g.AddReadyNodes(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	for d := 0; d < 2; d++ {
		p := fx.Pod(fmt.Sprintf("train-%d", d), 100, fx.GPUs(fx.GPUResource, 1))
		p.Spec.NodeName, p.Status.Phase = "gpu-0", v1.PodRunning
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train", UID: "rs-train", Controller: ptr.To(true)}}
		claim := fx.ExtendedResourceClaim(p, "gpu.example.com", fx.Driver, "gpu-0", 0, fmt.Sprintf("gpu-%d", d))
		p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: claim.Name,
			RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "main",
				ResourceName: string(fx.GPUResource), RequestName: claim.Spec.Devices.Requests[0].Name}}}
		if _, err := e.client.ResourceV1().ResourceClaims(p.Namespace).Create(e.ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := slow.IncreaseSize(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.at(0)
	if err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		pods, err := e.listers.Pods.List(labels.Everything())
		return err == nil && len(pods) == 2, nil
	}); err != nil {
		t.Fatal("the informer did not see the pods")
	}
	for _, d := range []time.Duration{time.Minute, 12 * time.Minute} {
		e.at(d)
		res, err := e.a.RunOnce(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Upcoming["slow"] != 1 {
			t.Fatalf("at %v: upcoming %v, want the slow group's node", d, res.Upcoming)
		}
		if len(res.Unneeded) != 0 {
			t.Fatalf("at %v: unneeded %v: gpu-0's pods would move to a node that has not registered", d, res.Unneeded)
		}
	}
	if got := g.Deleted(); len(got) != 0 {
		t.Errorf("deleted %v, want gpu-0 kept", got)
	}
}

// A drain outlives its loop; a refresh meanwhile may drop the node's
// group (its annotation turned invalid). The drain then gives up
// cleanly: no panic, the node stays and loses its ToBeDeleted taint.
func TestDrainOfAGroupDroppedMidDrain(t *testing.T) {
	e := newFailureEnv(t)
	cpu := e.provider.AddGroup(&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: nodegroup.Spec{MaxSize: 10, Template: *fx.Node("t", 8, 32, nil)}}, fakeprovider.Faults{})
	if err := cpu.AddReadyNodes(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.at(time.Hour)
	name := cpu.Names()[0]
	node, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.setTaint(e.ctx, name, ToBeDeletedTaint, v1.TaintEffectNoSchedule, true); err != nil {
		t.Fatal(err)
	}
	e.provider.RemoveGroup("cpu")
	err = e.a.removeNode(e.ctx, node, "cpu", "empty", time.Minute, metrics.GroupLabels{})
	if err == nil || !strings.Contains(err.Error(), "node group cpu is no longer one of the provider's; the node is kept") {
		t.Fatalf("removeNode of a dropped group: %v", err)
	}
	got, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the node is gone: %v", err)
	}
	for _, tt := range got.Spec.Taints {
		if tt.Key == ToBeDeletedTaint {
			t.Errorf("the node keeps its %s taint", ToBeDeletedTaint)
		}
	}
}

// A removed node whose provider deletes it later (Cluster API: replicas
// lowered at once, the Machine and its node going after) stays being
// deleted until its Node object is gone: it keeps its ToBeDeleted taint,
// is not counted towards the min size, and is not chosen again.
func TestRemovedNodesStayDeletingUntilGone(t *testing.T) {
	e := newFailureEnv(t)
	cpu := e.provider.AddGroup(&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: nodegroup.Spec{MinSize: 1, MaxSize: 10, Template: *fx.Node("t", 8, 32, nil)}},
		fakeprovider.Faults{DeletionDelay: 10 * time.Minute})
	if err := cpu.AddReadyNodes(e.ctx, 3); err != nil {
		t.Fatal(err)
	}
	loop := func(at time.Duration) *LoopResult {
		t.Helper()
		e.at(at)
		res, err := e.a.RunOnce(e.ctx)
		if err != nil {
			t.Fatalf("at %v: %v", at, err)
		}
		e.a.waitForDrains()
		return res
	}
	for i := 0; len(cpu.Deleted()) < 2 && i < 5; i++ {
		loop(time.Hour + time.Duration(i)*time.Second)
	}
	removed := cpu.Deleted()
	if len(removed) != 2 {
		t.Fatalf("removed %v, want 2 of the 3 empty nodes (min size 1)", removed)
	}
	for i := range 5 {
		res := loop(time.Hour + time.Minute + time.Duration(i)*10*time.Second)
		for _, v := range res.ScaleDown {
			if slices.Contains(removed, v.Node) && v.Code != scaledown.CurrentlyBeingDeleted {
				t.Errorf("loop %d: removed node %s: %s (%s), want %s", i, v.Node, v.Code, v.Reason, scaledown.CurrentlyBeingDeleted)
			}
		}
	}
	if got := cpu.Deleted(); len(got) != 2 {
		t.Errorf("deleted %v while the first two were still going, want only %v", got, removed)
	}
	for _, name := range removed {
		n, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s gone before the provider's delay: %v", name, err)
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(tt v1.Taint) bool { return tt.Key == ToBeDeletedTaint }) {
			t.Errorf("removed node %s lost its %s taint while the provider deletes it", name, ToBeDeletedTaint)
		}
	}
	// Once the provider is done, the nodes are forgotten.
	loop(time.Hour + 15*time.Minute)
	loop(time.Hour + 15*time.Minute + time.Second)
	if e.a.sd.isDeleting(removed[0]) || e.a.sd.isDeleting(removed[1]) {
		t.Errorf("nodes gone from the cluster still counted as being deleted")
	}
}

// A pod the scheduler is binding to a node the loop cannot tell yet (its
// extended-resource claim status written, the claim not yet seen) asks
// for no scale-up, but scale-down places it as a pending pod: the only
// node it can go to is not unneeded meanwhile.
func TestPodBindingToAnUnknownNodeKeepsItsNode(t *testing.T) {
	pod := fx.Pod("train-0", 4000, nil)
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "train-0-extended-resources-x"}
	e := newFailureEnv(t, pod)
	cpu := e.provider.AddGroup(&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: nodegroup.Spec{MaxSize: 10, Template: *fx.Node("t", 8, 32, nil)}}, fakeprovider.Faults{})
	if err := cpu.AddReadyNodes(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.at(time.Hour)
	res, err := e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.a.waitForDrains()
	if len(res.ScaleUps) != 0 {
		t.Errorf("scale-up %+v for a pod being bound", res.ScaleUps)
	}
	if len(res.Unneeded) != 0 || len(cpu.Deleted()) != 0 {
		t.Errorf("unneeded %v, deleted %v: the node the pod is being bound to looks empty", res.Unneeded, cpu.Deleted())
	}
}
