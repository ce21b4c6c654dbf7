package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
)

// The live loop honours CA's limits: IncreaseSize is asked for the capped
// count, and the pods the cap leaves out get NotTriggerScaleUp naming the
// limit. 20 one-GPU pods want 3 nodes of 64 cores and 8 DRA GPUs.
func TestScaleUpHonoursLimits(t *testing.T) {
	tests := []struct {
		name      string
		opts      limits.Options
		wantNodes int
		wantWhy   string
	}{
		{name: "--cores-total", opts: limits.Options{Limits: limits.Limits{Cores: limits.Range{Max: 128}}}, wantNodes: 2,
			wantWhy: "max cluster cpu limit reached"},
		{name: "--gpu-total counts DRA devices", opts: limits.Options{Limits: limits.Limits{GPUs: []limits.GPULimit{
			{Type: v1.ResourceName("example.com/gpu"), Range: limits.Range{Max: 8}}}}}, wantNodes: 1,
			wantWhy: "max cluster example.com/gpu limit reached"},
		{name: "--max-nodes-per-scaleup", opts: limits.Options{MaxNodesPerScaleUp: 1}, wantNodes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, provider, group, recorder := setup(t, unschedulablePods(20)...)
			a.cfg.Limits = tc.opts
			provider.EXPECT().Refresh(gomock.Any()).Return(nil)
			group.EXPECT().IncreaseSize(gomock.Any(), tc.wantNodes).Return(nil)
			res, err := a.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.ScaleUp == nil || res.ScaleUp.NewNodes != tc.wantNodes || len(res.ScaleUp.Pods) != 8*tc.wantNodes {
				t.Fatalf("scale-up = %+v, want gpu +%d for %d pods", res.ScaleUp, tc.wantNodes, 8*tc.wantNodes)
			}
			notTriggered := 0
			for _, e := range events(recorder) {
				if strings.Contains(e, "NotTriggerScaleUp") {
					notTriggered++
					if !strings.Contains(e, tc.wantWhy) {
						t.Errorf("event %q, want it to say %q", e, tc.wantWhy)
					}
				}
			}
			if tc.wantWhy != "" && notTriggered != 20-8*tc.wantNodes {
				t.Errorf("NotTriggerScaleUp events = %d, want %d", notTriggered, 20-8*tc.wantNodes)
			}
		})
	}
}

// With --balance-similar-node-groups one loop asks every similar group for
// its share: 20 one-GPU pods want 3 nodes, split 2 and 1 across two
// groups of the same template, and each pod's TriggeredScaleUp lists both.
func TestScaleUpBalancesSimilarGroups(t *testing.T) {
	asked, res, evs, err := balancedLoop(t, false)
	if err != nil {
		t.Fatal(err)
	}
	if asked[res.ScaleUp.NodeGroup] != 2 || asked["gpu-a"]+asked["gpu-b"] != 3 || len(res.ScaleUps) != 2 {
		t.Fatalf("IncreaseSize asked %v, executed %+v; want 2 of the chosen group and 1 of the other", asked, res.ScaleUps)
	}
	both := 0
	for _, e := range evs {
		if strings.Contains(e, "TriggeredScaleUp") && strings.Contains(e, "{gpu-a 0->") && strings.Contains(e, "{gpu-b 0->") {
			both++
		}
	}
	if both != 20 {
		t.Errorf("TriggeredScaleUp events naming both groups = %d, want 20", both)
	}
}

// A balanced group that refuses its share is backed off and the step
// stops there, as CA's executor does: the chosen group's nodes stand, its
// 16 pods name it alone, and the error names the group that failed.
func TestScaleUpBalancedGroupFails(t *testing.T) {
	asked, res, evs, err := balancedLoop(t, true)
	if res.ScaleUp == nil || len(res.ScaleUps) != 1 || asked[res.ScaleUp.NodeGroup] != 2 {
		t.Fatalf("executed %+v (asked %v), want the chosen group's 2 nodes only", res.ScaleUps, asked)
	}
	other := map[string]string{"gpu-a": "gpu-b", "gpu-b": "gpu-a"}[res.ScaleUp.NodeGroup]
	if !slices.Equal(res.FailedScaleUps, []string{other}) {
		t.Errorf("failed scale-ups %v, want [%s]", res.FailedScaleUps, other)
	}
	if err == nil || !strings.Contains(err.Error(), "scale up node group "+other+" by 1: out of capacity") {
		t.Errorf("error %v, want the failed group named", err)
	}
	chosenOnly := 0
	for _, e := range evs {
		if strings.Contains(e, "TriggeredScaleUp") {
			if strings.Contains(e, "{"+other) {
				t.Errorf("event %q names the group that failed", e)
			}
			chosenOnly++
		}
	}
	if chosenOnly != 16 {
		t.Errorf("TriggeredScaleUp events = %d, want 16 (the chosen group's two nodes of 8 GPUs)", chosenOnly)
	}
}

// balancedLoop runs one loop of 20 one-GPU pods over two similar groups
// with balancing on; failSecond makes the second IncreaseSize fail.
func balancedLoop(t *testing.T, failSecond bool) (map[string]int, *LoopResult, []string, error) {
	ctrl := gomock.NewController(t)
	objs := append(unschedulablePods(20), fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	asked := map[string]int{}
	calls := 0
	var groups []cloudprovider.NodeGroup
	for _, name := range []string{"gpu-a", "gpu-b"} {
		group := mocks.NewMockNodeGroup(ctrl)
		tmpl, slices := (&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: nodegroup.Spec{Template: *fx.Node("t", 64, 256, nil),
				ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}).NewNode("template-" + name)
		group.EXPECT().Id().Return(name).AnyTimes()
		group.EXPECT().MinSize().Return(0).AnyTimes()
		group.EXPECT().MaxSize().Return(10).AnyTimes()
		group.EXPECT().TargetSize().Return(0, nil).AnyTimes()
		group.EXPECT().TemplateNodeInfo().Return(tmpl, slices, nil).AnyTimes()
		group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
		expectFlagOptions(group)
		group.EXPECT().IncreaseSize(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, n int) error {
			calls++
			if failSecond && calls == 2 {
				return errors.New("out of capacity")
			}
			asked[name] += n
			return nil
		})
		groups = append(groups, group)
	}
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return(groups).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(nil, nil).AnyTimes()
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	exp, _ := expander.New("least-waste", nil, 1)
	recorder := record.NewFakeRecorder(1000)
	a := New(Config{Client: client, View: listers, Provider: provider, Expander: exp, Recorder: recorder,
		StatusNamespace: "kube-system", StatusName: "draxr-autoscaler-status",
		Limits: limits.Options{Balancing: limits.Balancing{Enabled: true}}})
	res, err := a.RunOnce(context.Background())
	return asked, res, events(recorder), err
}
