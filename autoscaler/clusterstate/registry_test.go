package clusterstate_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/backoff"
	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/taints"
	"draxr.dev/draxr/simulator/view"
	"draxr.dev/draxr/test/fakeprovider"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func gpuGroup(name string, max int) *nodegroup.NodeGroup {
	return &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodegroup.Spec{MaxSize: max,
		Template: *fx.Node("t", 64, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}
}

// env is a fake API server, the fake provider, a registry with CA's
// defaults and a clock the test moves.
type env struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	listers  view.View
	provider *fakeprovider.Provider
	registry *clusterstate.Registry
	recorder *record.FakeRecorder
	now      time.Time
}

func newEnv(t *testing.T) *env { return newEnvWith(t, taints.Config{}) }

// newEnvWith takes the taint flags.
func newEnvWith(t *testing.T, tc taints.Config) *env {
	t.Helper()
	e := &env{t: t, client: fake.NewClientset(), now: t0, recorder: record.NewFakeRecorder(100)}
	f := informers.NewSharedInformerFactory(e.client, 0)
	e.listers = liveview.FromInformers(f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.ctx = ctx
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	e.provider = fakeprovider.New(e.client, func() time.Time { return e.now })
	e.registry = clusterstate.NewRegistry(clusterstate.RegistryConfig{
		MaxNodeProvisionTime: clusterstate.DefaultMaxNodeProvisionTime, MaxNodeStartupTime: clusterstate.DefaultMaxNodeStartupTime,
		OkTotalUnreadyCount: clusterstate.DefaultOkTotalUnreadyCount, MaxTotalUnreadyPercentage: clusterstate.DefaultMaxTotalUnreadyPercentage,
		Backoff:  backoff.New(backoff.DefaultInitial, backoff.DefaultMax, backoff.DefaultResetTimeout),
		Recorder: e.recorder, EventObject: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "draxr-autoscaler-status", Namespace: "kube-system"}},
		Taints: tc,
	})
	return e
}

// at moves the clock to t0+d, lets the provider act and waits until the
// informers show it.
func (e *env) at(d time.Duration) {
	e.t.Helper()
	e.now = t0.Add(d)
	if err := e.provider.Advance(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	e.waitSynced()
}

func (e *env) waitSynced() {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return e.provider.Synced(ctx, e.listers.Nodes, e.listers.Slices), nil
	})
	if err != nil {
		e.t.Fatal("informers did not catch up with the fake provider")
	}
}

func (e *env) update() *clusterstate.State {
	e.t.Helper()
	as, err := e.registry.Assess(e.listers, e.provider, e.now)
	if err != nil {
		e.t.Fatalf("Assess: %v", err)
	}
	core.ApplyClusterActions(e.ctx, e.registry, as.Actions, e.now)
	st, err := e.registry.State(as)
	if err != nil {
		e.t.Fatalf("State: %v", err)
	}
	return st
}

func (e *env) scaleUp(g *fakeprovider.Group, n int) {
	e.t.Helper()
	if err := g.IncreaseSize(e.ctx, n); err != nil {
		e.t.Fatal(err)
	}
	e.registry.RegisterScaleUp(g.Id(), n, e.now)
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(events []string, reason, text string) bool {
	for _, ev := range events {
		if strings.Contains(ev, " "+reason+" ") && strings.Contains(ev, text) {
			return true
		}
	}
	return false
}

// The failure model: what the cluster state gives up on, when, and what
// it says.
func TestRegistryGivesUpOnNodesThatDoNotComeUp(t *testing.T) {
	tests := []struct {
		name   string
		faults fakeprovider.Faults
		// registered: no RegisterScaleUp, as after a restart.
		noRequest bool
		// before: a check at t0+10m, nothing given up yet.
		wantUpcomingBefore int
		after              time.Duration
		wantEvent          string // reason at `after`, "" for none
		wantEventText      string
		wantDeleted        []string
		wantDecreases      []int
		wantBackedOff      bool
		wantBackoffCode    string
		wantUpcomingAfter  int
		wantReadyAfter     int
	}{
		{name: "never registers: target given back, group backed off",
			faults: fakeprovider.Faults{NeverRegister: true}, wantUpcomingBefore: 2,
			after: 16 * time.Minute, wantEvent: clusterstate.EventScaleUpTimedOut, wantEventText: "Nodes added to group gpu failed to register",
			wantDecreases: []int{-2}, wantBackedOff: true, wantBackoffCode: "timeout"},
		{name: "registers, never Ready: nodes deleted, group backed off",
			faults: fakeprovider.Faults{NeverReady: true}, wantUpcomingBefore: 2,
			after: 16 * time.Minute, wantEvent: clusterstate.EventScaleUpTimedOut, wantEventText: "did not become Ready within 15m0s",
			wantDeleted: []string{"gpu-0", "gpu-1"}, wantBackedOff: true, wantBackoffCode: "timeout"},
		{name: "slow registration within the limit is waited for",
			faults: fakeprovider.Faults{RegistrationDelay: 12 * time.Minute, ReadyDelay: time.Minute}, wantUpcomingBefore: 2,
			after: 14 * time.Minute, wantReadyAfter: 2},
		{name: "registered late, not Ready by the provision time: given up",
			faults: fakeprovider.Faults{RegistrationDelay: 10 * time.Minute, NeverReady: true}, wantUpcomingBefore: 2,
			after: 16 * time.Minute, wantEvent: clusterstate.EventScaleUpTimedOut, wantEventText: "failed to register within",
			wantDeleted: []string{"gpu-0", "gpu-1"}, wantBackedOff: true, wantBackoffCode: "timeout"},
		{name: "instances in error are deleted at once, backed off with their class",
			faults: fakeprovider.Faults{InstanceError: &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass,
				ErrorCode: "QUOTA_EXCEEDED", ErrorMessage: "GPU quota exhausted"}},
			after: time.Minute, wantEvent: clusterstate.EventScaleUpFailed,
			wantEventText: "Failed adding 2 nodes to group gpu due to OutOfResource.QUOTA_EXCEEDED - GPU quota exhausted",
			wantDeleted:   []string{"fake:///gpu/gpu-0", "fake:///gpu/gpu-1"}, wantBackedOff: true, wantBackoffCode: "QUOTA_EXCEEDED"},
		{name: "long-unregistered instances without a scale-up in flight are removed",
			faults: fakeprovider.Faults{NeverRegister: true}, noRequest: true, wantUpcomingBefore: 2,
			after: 16 * time.Minute, wantEvent: clusterstate.EventDeleteUnregistered, wantEventText: "Removed unregistered nodes",
			wantDeleted: []string{"fake:///gpu/gpu-0", "fake:///gpu/gpu-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := e.provider.AddGroup(gpuGroup("gpu", 10), tc.faults)
			other := e.provider.AddGroup(gpuGroup("other", 10), fakeprovider.Faults{})
			if tc.noRequest {
				if err := g.IncreaseSize(e.ctx, 2); err != nil {
					t.Fatal(err)
				}
			} else {
				e.scaleUp(g, 2)
			}
			e.at(0)
			e.update()
			if tc.wantUpcomingBefore > 0 {
				e.at(10 * time.Minute)
				st := e.update()
				if st.Upcoming["gpu"] != tc.wantUpcomingBefore || len(st.GivenUp) != 0 {
					t.Fatalf("at 10m: upcoming %d, given up %v; want %d upcoming, nothing given up",
						st.Upcoming["gpu"], st.GivenUp, tc.wantUpcomingBefore)
				}
				if evs := e.events(); len(evs) != 0 {
					t.Fatalf("at 10m: events %v, want none", evs)
				}
			}
			e.at(tc.after)
			st := e.update()
			evs := e.events()
			if tc.wantEvent == "" && len(evs) != 0 {
				t.Errorf("events %v, want none", evs)
			}
			if tc.wantEvent != "" && !hasEvent(evs, tc.wantEvent, tc.wantEventText) {
				t.Errorf("events %v, want %s with %q", evs, tc.wantEvent, tc.wantEventText)
			}
			if got := g.Deleted(); !slices.Equal(got, tc.wantDeleted) {
				t.Errorf("deleted %v, want %v", got, tc.wantDeleted)
			}
			if got := g.Decreases(); !slices.Equal(got, tc.wantDecreases) {
				t.Errorf("target decreases %v, want %v", got, tc.wantDecreases)
			}
			bs := e.registry.BackoffStatus("gpu", e.now)
			if bs.BackedOff != tc.wantBackedOff || bs.Reason.Code != tc.wantBackoffCode {
				t.Errorf("backoff %+v, want backed off %v with code %q", bs, tc.wantBackedOff, tc.wantBackoffCode)
			}
			_, excluded := st.NotForScaleUp["gpu"]
			if excluded != tc.wantBackedOff {
				t.Errorf("gpu excluded from scale-up = %v (%v), want %v", excluded, st.NotForScaleUp, tc.wantBackedOff)
			}
			eligible := st.ScaleUpEligible()
			if !slices.ContainsFunc(eligible, func(n *nodegroup.NodeGroup) bool { return n.Name == other.Id() }) {
				t.Errorf("the healthy group is not eligible for scale-up: %v", st.NotForScaleUp)
			}
			if st.Upcoming["gpu"] != tc.wantUpcomingAfter {
				t.Errorf("upcoming %d, want %d (given-up nodes no longer hold the pods)", st.Upcoming["gpu"], tc.wantUpcomingAfter)
			}
			if st.GroupReadiness["gpu"].Ready != tc.wantReadyAfter {
				t.Errorf("ready %d, want %d", st.GroupReadiness["gpu"].Ready, tc.wantReadyAfter)
			}
			for _, n := range st.Objects.Nodes {
				if slices.Contains(tc.wantDeleted, n.Name) {
					t.Errorf("given-up node %s is still in the snapshot", n.Name)
				}
			}
		})
	}
}

// A scale-up whose nodes came up ends the group's backoff.
func TestRegistrySuccessfulScaleUpEndsBackoff(t *testing.T) {
	e := newEnv(t)
	g := e.provider.AddGroup(gpuGroup("gpu", 10), fakeprovider.Faults{ReadyDelay: time.Minute})
	e.registry.RegisterFailedScaleUp("gpu", cloudprovider.OutOfResources("STOCKOUT", "zone a"), e.now)
	if !e.registry.BackoffStatus("gpu", e.now).BackedOff {
		t.Fatal("not backed off after a failed IncreaseSize")
	}
	if evs := e.events(); !hasEvent(evs, clusterstate.EventFailedToScaleUpGroup, "OutOfResource.STOCKOUT: zone a") {
		t.Errorf("events %v, want FailedToScaleUpGroup with the error", evs)
	}
	e.at(6 * time.Minute)
	e.scaleUp(g, 1)
	e.at(8 * time.Minute)
	st := e.update()
	if st.GroupReadiness["gpu"].Ready != 1 {
		t.Fatalf("ready %d, want 1", st.GroupReadiness["gpu"].Ready)
	}
	e.registry.RegisterFailedScaleUp("gpu", errors.New("boom"), e.now)
	if until := e.registry.BackoffStatus("gpu", e.now).Until; !until.Equal(e.now.Add(backoff.DefaultInitial)) {
		t.Errorf("backoff after success then failure ends at +%v, want the initial %v", until.Sub(e.now), backoff.DefaultInitial)
	}
}

// Problems of one group never stop the others.
func TestRegistryOneBadGroupDoesNotStopTheOthers(t *testing.T) {
	tests := []struct {
		name    string
		faults  fakeprovider.Faults
		setup   func(e *env, g *fakeprovider.Group)
		wantErr string
		wantOut string // NotForScaleUp text for "bad"
	}{
		{name: "template fails", faults: fakeprovider.Faults{TemplateErr: errors.New("no image")},
			wantErr: "node group bad: template: no image", wantOut: "no image"},
		{name: "target size fails", faults: fakeprovider.Faults{TargetSizeErr: errors.New("API down")},
			wantErr: "node group bad: target size: API down", wantOut: "target size: API down"},
		{name: "giving back the target fails",
			faults: fakeprovider.Faults{NeverRegister: true, DecreaseTargetSizeErr: errors.New("locked")},
			setup: func(e *env, g *fakeprovider.Group) {
				e.scaleUp(g, 1)
			}, wantErr: "node group bad: decrease target size by 1: locked", wantOut: "in backoff"},
		{name: "deleting a node that never turned Ready fails",
			faults: fakeprovider.Faults{NeverReady: true, DeleteNodesErr: errors.New("forbidden")},
			setup: func(e *env, g *fakeprovider.Group) {
				e.scaleUp(g, 1)
			}, wantErr: "forbidden", wantOut: "in backoff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bad := e.provider.AddGroup(gpuGroup("bad", 10), fakeprovider.Faults{})
			good := e.provider.AddGroup(gpuGroup("good", 10), fakeprovider.Faults{})
			if err := good.AddReadyNodes(e.ctx, 2); err != nil {
				t.Fatal(err)
			}
			bad.SetFaults(tc.faults)
			if tc.setup != nil {
				tc.setup(e, bad)
			}
			e.at(0)
			e.update()
			e.at(20 * time.Minute)
			st := e.update()
			if !slices.ContainsFunc(st.Errors, func(err error) bool { return strings.Contains(err.Error(), tc.wantErr) }) {
				t.Errorf("errors %v, want one with %q", st.Errors, tc.wantErr)
			}
			if !strings.Contains(st.NotForScaleUp["bad"], tc.wantOut) {
				t.Errorf("bad group not for scale-up: %q, want %q", st.NotForScaleUp["bad"], tc.wantOut)
			}
			if _, out := st.NotForScaleUp["good"]; out || st.GroupReadiness["good"].Ready != 2 || !st.Ready["good-0"] {
				t.Errorf("good group: not for scale-up %q, readiness %+v; want eligible with 2 ready nodes",
					st.NotForScaleUp["good"], st.GroupReadiness["good"])
			}
		})
	}
}

// Unready nodes are counted as CA counts them; beyond
// --ok-total-unready-count and --max-total-unready-percentage the cluster
// is unhealthy (scale-down pauses) and so is a group.
func TestRegistryClusterHealth(t *testing.T) {
	tests := []struct {
		total, unready int
		wantHealthy    bool
	}{
		{total: 10, unready: 3, wantHealthy: true},  // within the count
		{total: 10, unready: 4, wantHealthy: true},  // 40% <= 45%
		{total: 10, unready: 5, wantHealthy: false}, // 50%
		{total: 4, unready: 4, wantHealthy: false},
		{total: 4, unready: 0, wantHealthy: true},
	}
	for _, tc := range tests {
		e := newEnv(t)
		g := e.provider.AddGroup(gpuGroup("gpu", 20), fakeprovider.Faults{})
		if err := g.AddReadyNodes(e.ctx, tc.total); err != nil {
			t.Fatal(err)
		}
		e.at(time.Hour)
		for i, name := range g.Names()[:tc.unready] {
			n, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Conditions[0].Status = v1.ConditionFalse
			n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(e.now.Add(-time.Duration(i) * time.Second))
			if _, err := e.client.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.waitSynced()
		st := e.update()
		if st.Readiness.Unready != tc.unready || st.Readiness.Ready != tc.total-tc.unready {
			t.Errorf("%d/%d unready: readiness %+v", tc.unready, tc.total, st.Readiness)
		}
		if st.Healthy != tc.wantHealthy {
			t.Errorf("%d/%d unready: healthy = %v, want %v", tc.unready, tc.total, st.Healthy, tc.wantHealthy)
		}
		if _, out := st.NotForScaleUp["gpu"]; out == tc.wantHealthy {
			t.Errorf("%d/%d unready: group not for scale-up = %v (%q)", tc.unready, tc.total, out, st.NotForScaleUp["gpu"])
		}
		if len(g.Deleted()) != 0 {
			t.Errorf("unready nodes that were Ready once were deleted: %v", g.Deleted())
		}
	}
}

// A group's own max node provision and start-up times
// (autoscaling-options-*) replace the flags for that group only.
func TestGroupProvisionAndStartupTimes(t *testing.T) {
	tests := []struct {
		name       string
		faults     fakeprovider.Faults
		annotation string
		wantEvent  string
	}{
		{name: "provision time", faults: fakeprovider.Faults{NeverRegister: true},
			annotation: nodegroup.AutoscalingOptionsPrefix + nodegroup.OptMaxNodeProvisionTime, wantEvent: "failed to register within"},
		{name: "startup time", faults: fakeprovider.Faults{NeverReady: true},
			annotation: nodegroup.AutoscalingOptionsPrefix + nodegroup.OptMaxNodeStartupTime, wantEvent: "did not become Ready within 2m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			quick := gpuGroup("quick", 10)
			quick.Annotations = map[string]string{tc.annotation: "2m"}
			q := e.provider.AddGroup(quick, tc.faults)
			d := e.provider.AddGroup(gpuGroup("default", 10), tc.faults)
			e.scaleUp(q, 1)
			e.scaleUp(d, 1)
			e.at(0)
			e.update()
			e.at(3 * time.Minute)
			e.update()
			evs := e.events()
			if !hasEvent(evs, clusterstate.EventScaleUpTimedOut, "group quick") || !hasEvent(evs, clusterstate.EventScaleUpTimedOut, tc.wantEvent) {
				t.Errorf("events %v, want %s for group quick (%q) after its 2m", evs, clusterstate.EventScaleUpTimedOut, tc.wantEvent)
			}
			if hasEvent(evs, clusterstate.EventScaleUpTimedOut, "group default") {
				t.Errorf("events %v: group default timed out before the flag's 15m", evs)
			}
			if !e.registry.BackoffStatus("quick", e.now).BackedOff || e.registry.BackoffStatus("default", e.now).BackedOff {
				t.Errorf("backed off: quick %v, default %v; want quick only",
					e.registry.BackoffStatus("quick", e.now).BackedOff, e.registry.BackoffStatus("default", e.now).BackedOff)
			}
		})
	}
}

// A node whose Ready condition is True but that cannot take pods yet (the
// not-ready taint the node lifecycle controller lifts a moment later, a
// startup taint, a network or disk condition) is still coming up, as CA
// reads readiness: it stays upcoming, as its template, so the pods planned
// for it are not planned on yet another node; past the start-up time it
// is unready, and never deleted for it.
func TestRegistryNodesHeldBackAreStillComing(t *testing.T) {
	tests := []struct {
		name      string
		taint     string
		condition v1.NodeConditionType
		flags     taints.Config
		wantHeld  bool
	}{
		{name: "not-ready taint", taint: v1.TaintNodeNotReady, wantHeld: true},
		{name: "network-unavailable taint", taint: v1.TaintNodeNetworkUnavailable, wantHeld: true},
		{name: "disk-pressure taint", taint: v1.TaintNodeDiskPressure, wantHeld: true},
		{name: "startup taint", taint: "startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver", wantHeld: true},
		{name: "ignore taint", taint: "ignore-taint.cluster-autoscaler.kubernetes.io/cni", wantHeld: true},
		{name: "NetworkUnavailable condition", condition: v1.NodeNetworkUnavailable, wantHeld: true},
		{name: "--startup-taint", taint: "node.cilium.io/agent-not-ready", flags: taints.Config{StartupTaints: []string{"node.cilium.io/agent-not-ready"}}, wantHeld: true},
		{name: "--startup-taint-prefix", taint: "example.com/booting-disk", flags: taints.Config{StartupTaintPrefixes: []string{"example.com/booting-"}}, wantHeld: true},
		{name: "without the flag, the same taint is not readiness", taint: "node.cilium.io/agent-not-ready"},
		{name: "status taint is not readiness", taint: "status-taint.cluster-autoscaler.kubernetes.io/x"},
		{name: "--status-taint is not readiness", taint: "example.com/degraded", flags: taints.Config{StatusTaints: []string{"example.com/degraded"}}},
		{name: "a workload taint is not readiness", taint: "dedicated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, tc.flags)
			g := e.provider.AddGroup(gpuGroup("gpu", 10), fakeprovider.Faults{})
			e.scaleUp(g, 2)
			e.at(0)
			node, err := e.client.CoreV1().Nodes().Get(e.ctx, "gpu-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.taint != "" {
				node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: tc.taint, Effect: v1.TaintEffectNoSchedule})
			}
			if tc.condition != "" {
				node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: tc.condition, Status: v1.ConditionTrue})
			}
			updated, err := e.client.CoreV1().Nodes().Update(e.ctx, node, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				n, err := e.listers.Nodes.Get("gpu-0")
				return err == nil && n.ResourceVersion == updated.ResourceVersion, nil
			})
			if err != nil {
				t.Fatal("the informer did not see the node change")
			}

			e.at(time.Minute)
			st := e.update()
			rd := st.GroupReadiness["gpu"]
			wantReady, wantUpcoming := 2, 0
			if tc.wantHeld {
				wantReady, wantUpcoming = 1, 1
			}
			if rd.Ready != wantReady || rd.NotStarted != 2-wantReady || st.Upcoming["gpu"] != wantUpcoming {
				t.Fatalf("at 1m: ready %d, not started %d, upcoming %d; want %d ready, %d upcoming",
					rd.Ready, rd.NotStarted, st.Upcoming["gpu"], wantReady, wantUpcoming)
			}
			for _, n := range st.Objects.Nodes {
				if n.Name == "gpu-0" && tc.wantHeld && len(n.Spec.Taints) != 0 {
					t.Errorf("the held-back node is planned with its taints %v, want its template's", n.Spec.Taints)
				}
			}
			if !tc.wantHeld {
				return
			}

			e.at(20 * time.Minute)
			st = e.update()
			rd = st.GroupReadiness["gpu"]
			if rd.Ready != 1 || rd.Unready != 1 || rd.NotStarted != 0 || st.Upcoming["gpu"] != 0 {
				t.Errorf("at 20m: ready %d, unready %d, not started %d, upcoming %d; want 1 ready, 1 unready",
					rd.Ready, rd.Unready, rd.NotStarted, st.Upcoming["gpu"])
			}
			if got := g.Deleted(); len(got) != 0 {
				t.Errorf("deleted %v: a Ready node held back by %s was given up", got, tc.name)
			}
		})
	}
}

// The registry only reads: what it makes of nodes that did not come up is
// a list of actions, and until the loop applies them the cloud is
// untouched, no event is recorded and the snapshot still counts the
// nodes.
func TestRegistryRecommendsAndDoesNotAct(t *testing.T) {
	tests := []struct {
		name      string
		faults    fakeprovider.Faults
		noRequest bool
		after     time.Duration
		want      []string // Kind, and what it acts on
	}{
		{name: "never registers", faults: fakeprovider.Faults{NeverRegister: true}, after: 16 * time.Minute,
			want: []string{"Emit ScaleUpTimedOut", "BackOff timeout", "RevertScaleUp -2"}},
		{name: "never Ready", faults: fakeprovider.Faults{NeverReady: true}, after: 16 * time.Minute,
			want: []string{"Emit ScaleUpTimedOut", "BackOff timeout", "DeleteNotStarted [gpu-0 gpu-1]"}},
		{name: "instances in error", faults: fakeprovider.Faults{InstanceError: &cloudprovider.InstanceErrorInfo{
			ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "QUOTA_EXCEEDED", ErrorMessage: "GPU quota exhausted"}},
			after: 0,
			want:  []string{"Emit ScaleUpFailed", "BackOff QUOTA_EXCEEDED", "DeleteFailedInstances [fake:///gpu/gpu-0 fake:///gpu/gpu-1]"}},
		{name: "long unregistered", faults: fakeprovider.Faults{NeverRegister: true}, noRequest: true, after: 16 * time.Minute,
			want: []string{"DeleteLongUnregistered [fake:///gpu/gpu-0 fake:///gpu/gpu-1]"}},
		{name: "within the limits", faults: fakeprovider.Faults{NeverRegister: true}, after: 10 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := e.provider.AddGroup(gpuGroup("gpu", 10), tc.faults)
			if tc.noRequest {
				if err := g.IncreaseSize(e.ctx, 2); err != nil {
					t.Fatal(err)
				}
			} else {
				e.scaleUp(g, 2)
			}
			if tc.after > 0 { // the timers start at the first loop
				e.at(0)
				e.update()
			}
			e.at(tc.after)
			as, err := e.registry.Assess(e.listers, e.provider, e.now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range as.Actions {
				if a.Group.Id() != "gpu" {
					t.Errorf("action %s for group %s, want gpu", a.Kind, a.Group.Id())
				}
				switch a.Kind {
				case clusterstate.Emit:
					got = append(got, "Emit "+a.Event.Reason)
				case clusterstate.BackOff:
					got = append(got, "BackOff "+a.Reason.Code)
				case clusterstate.RevertScaleUp:
					got = append(got, fmt.Sprintf("RevertScaleUp %d", a.Delta))
				default:
					var ids []string
					for _, n := range a.Nodes {
						ids = append(ids, cmp.Or(n.Spec.ProviderID, n.Name))
					}
					if a.Kind == clusterstate.DeleteNotStarted {
						ids = ids[:0]
						for _, n := range a.Nodes {
							ids = append(ids, n.Name)
						}
					}
					got = append(got, fmt.Sprintf("%s %v", a.Kind, ids))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
			st, err := e.registry.State(as)
			if err != nil {
				t.Fatal(err)
			}
			if d, dec := g.Deleted(), g.Decreases(); len(d) != 0 || len(dec) != 0 {
				t.Errorf("assessing deleted %v and decreased %v; the registry must not act", d, dec)
			}
			if evs := e.events(); len(evs) != 0 {
				t.Errorf("assessing recorded %v; events are the loop's to record", evs)
			}
			if e.registry.BackoffStatus("gpu", e.now).BackedOff {
				t.Error("assessing backed the group off")
			}
			if len(st.GivenUp) != 0 || st.Upcoming["gpu"] != 2 {
				t.Errorf("state without the actions: given up %v, upcoming %d; want nothing given up, 2 upcoming", st.GivenUp, st.Upcoming["gpu"])
			}
		})
	}
}
