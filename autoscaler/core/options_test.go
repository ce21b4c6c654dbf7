package core

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	"draxr.dev/draxr/simulator/nodegroup"
)

// newTwoGroupsEnv is sdEnv with two mocked groups: nodes named "fast-*"
// belong to "fast", whose GetOptions applies fast's overrides, nodes named
// "slow-*" to "slow", which has none; "other-*" nodes to no group. Only
// fast may delete nodes: a DeleteNodes call on slow fails the test.
func newTwoGroupsEnv(t *testing.T, sd ScaleDownConfig, fast nodegroup.Options, objs ...runtime.Object) *sdEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	client := fake.NewClientset(objs...)
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := action.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		return true, nil, client.Tracker().Delete(podsGVR, action.GetNamespace(), name)
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	group := func(name string, overrides nodegroup.Options) *mocks.MockNodeGroup {
		g := mocks.NewMockNodeGroup(ctrl)
		g.EXPECT().Id().Return(name).AnyTimes()
		g.EXPECT().MinSize().Return(0).AnyTimes()
		g.EXPECT().MaxSize().Return(10).AnyTimes()
		g.EXPECT().TargetSize().Return(0, nil).AnyTimes()
		g.EXPECT().TemplateNodeInfo().Return(cpuNode("template-"+name), nil, nil).AnyTimes()
		g.EXPECT().Nodes().Return(nil, nil).AnyTimes()
		g.EXPECT().GetOptions(gomock.Any()).DoAndReturn(func(d cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
			o := d.WithOverrides(overrides)
			return &o, nil
		}).AnyTimes()
		return g
	}
	fastGroup, slowGroup := group("fast", fast), group("slow", nodegroup.Options{})
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{fastGroup, slowGroup}).AnyTimes()
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).DoAndReturn(func(n *v1.Node) (cloudprovider.NodeGroup, error) {
		switch {
		case strings.HasPrefix(n.Name, "fast-"):
			return fastGroup, nil
		case strings.HasPrefix(n.Name, "slow-"):
			return slowGroup, nil
		}
		return nil, nil
	}).AnyTimes()
	sd.Enabled = true
	sd.PodGonePollInterval = 5 * time.Millisecond
	sd.MaxGracefulTermination = 10 * time.Second
	sd.Drainability = drainability.DefaultOptions()
	e := &sdEnv{client: client, group: fastGroup, recorder: record.NewFakeRecorder(1000), now: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	e.a = New(Config{Client: client, View: listers, Provider: provider, Recorder: e.recorder, Now: e.clock, ScaleDown: sd})
	return e
}

func removed(res *LoopResult) string {
	out := slices.Clone(res.Removed)
	slices.Sort(out)
	return strings.Join(out, ",")
}

// A group's scaledownunneededtime replaces --scale-down-unneeded-time for
// its nodes only: after 2s the fast group's empty node goes, the other
// group's, under the flag's 10m, stays.
func TestGroupUnneededTime(t *testing.T) {
	e := newTwoGroupsEnv(t, ScaleDownConfig{UnneededTime: 10 * time.Minute, UtilizationThreshold: 0.5},
		nodegroup.Options{ScaleDownUnneededTime: ptr.To(time.Second)}, cpuNode("fast-a"), cpuNode("slow-a"))
	e.deleteNodeObjects(1)
	if res := e.loop(t); len(res.Removed) != 0 || len(res.Unneeded) != 2 {
		t.Fatalf("first loop: removed %v, unneeded %v; want none removed, both unneeded", res.Removed, res.Unneeded)
	}
	e.advance(2 * time.Second)
	res := e.loop(t)
	if got := removed(res); got != "fast-a" {
		t.Fatalf("after 2s removed %q, want fast-a only (its group's 1s)", got)
	}
	if !slices.Contains(res.Unneeded, "slow-a") {
		t.Errorf("unneeded %v: slow-a should still be unneeded, waiting for the flag's 10m", res.Unneeded)
	}
	found := false
	for _, ev := range events(e.recorder) {
		found = found || strings.Contains(ev, EventScaleDown) && strings.Contains(ev, "unneeded for 1s")
	}
	if !found {
		t.Error("no ScaleDown event naming the group's unneeded time (1s)")
	}
}

// A group's scaledownutilizationthreshold replaces the flag: a node used
// at 60% goes from the group whose threshold is 0.9 and stays, as not
// underutilized, in the group on the flag's 0.5.
func TestGroupUtilizationThreshold(t *testing.T) {
	e := newTwoGroupsEnv(t, ScaleDownConfig{UtilizationThreshold: 0.5},
		nodegroup.Options{ScaleDownUtilizationThreshold: ptr.To(0.9)},
		cpuNode("fast-a"), cpuNode("slow-a"), cpuNode("other-spare"),
		rsPod("p-fast", "fast-a", 4800), rsPod("p-slow", "slow-a", 4800))
	e.deleteNodeObjects(1)
	res := e.loop(t)
	if got := removed(res); got != "fast-a" {
		t.Fatalf("removed %q, want fast-a only", got)
	}
	if slices.Contains(res.Unneeded, "slow-a") {
		t.Errorf("slow-a is unneeded at 60%% use with the flag's threshold 0.5")
	}
}

// scaledowngpuutilizationthreshold applies to a group's nodes with DRA
// devices, scaledownutilizationthreshold to the others: with the GPU
// threshold at 0, the group's empty GPU node stays and its empty CPU node
// goes.
func TestGroupGpuUtilizationThreshold(t *testing.T) {
	e := newTwoGroupsEnv(t, ScaleDownConfig{UtilizationThreshold: 0.5},
		nodegroup.Options{ScaleDownGpuUtilizationThreshold: ptr.To(0.0)},
		cpuNode("fast-gpu"), fx.GPUSlice("fast-gpu", 8), cpuNode("fast-cpu"))
	e.deleteNodeObjects(1)
	if got := removed(e.loop(t)); got != "fast-cpu" {
		t.Fatalf("removed %q, want fast-cpu only (the GPU node is held by the group's GPU threshold 0)", got)
	}
}

// A group's scaledownunreadytime replaces --scale-down-unready-time: a
// node unready for 5m goes from the group whose time is 1m, and stays in
// the group on the flag's 20m.
func TestGroupUnreadyTime(t *testing.T) {
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	unready := func(name string) *v1.Node {
		n := cpuNode(name)
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.Time{Time: now.Add(-5 * time.Minute)}}}
		return n
	}
	sd := ScaleDownConfig{UtilizationThreshold: 0.5}
	sd.UnreadyTime = 20 * time.Minute
	e := newTwoGroupsEnv(t, sd, nodegroup.Options{ScaleDownUnreadyTime: ptr.To(time.Minute)},
		cpuNode("fast-keep"), rsPod("big-fast", "fast-keep", 7000), cpuNode("slow-keep"), rsPod("big-slow", "slow-keep", 7000),
		unready("fast-dead"), unready("slow-dead"))
	e.deleteNodeObjects(1)
	if got := removed(e.loop(t)); got != "fast-dead" {
		t.Fatalf("removed %q, want fast-dead only", got)
	}
}
