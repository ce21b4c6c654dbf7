package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// unschedulablePods are n one-GPU pods the scheduler gave up on.
func unschedulablePods(n int) []runtime.Object {
	var out []runtime.Object
	for i := 0; i < n; i++ {
		p := fx.Pod(fmt.Sprintf("train-%d", i), 100, fx.GPUs(fx.GPUResource, 1))
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
		out = append(out, p)
	}
	return out
}

// setup returns an autoscaler over a fake API server holding objs, with a
// mocked provider of one 8-GPU DRA group, and the event recorder.
func setup(t *testing.T, objs ...runtime.Object) (*Autoscaler, *mocks.MockProvider, *mocks.MockNodeGroup, *record.FakeRecorder) {
	t.Helper()
	ctrl := gomock.NewController(t)
	objs = append(objs, fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	group := mocks.NewMockNodeGroup(ctrl)
	expectFlagOptions(group)
	tmpl, slices := (&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{Template: *fx.Node("t", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}).NewNode("template-gpu")
	group.EXPECT().Id().Return("gpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(10).AnyTimes()
	group.EXPECT().TargetSize().Return(0, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(tmpl, slices, nil).AnyTimes()
	group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(nil, nil).AnyTimes()

	exp, _ := expander.New("least-waste", nil, 1)
	recorder := record.NewFakeRecorder(1000)
	a := New(Config{Client: client, View: listers, Provider: provider, Expander: exp, Recorder: recorder,
		StatusNamespace: "kube-system", StatusName: DefaultStatusConfigMapName})
	return a, provider, group, recorder
}

func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestScaleUpExecutesFirstStep(t *testing.T) {
	a, provider, group, recorder := setup(t, unschedulablePods(20)...)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	group.EXPECT().IncreaseSize(gomock.Any(), 3).Return(nil)
	res, err := a.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.ScaleUp == nil || res.ScaleUp.NewNodes != 3 || len(res.ScaleUp.Pods) != 20 {
		t.Fatalf("scale-up = %+v, want gpu +3 for 20 pods", res.ScaleUp)
	}
	triggered := 0
	for _, e := range events(recorder) {
		if strings.Contains(e, "TriggeredScaleUp") && strings.Contains(e, "{gpu 0->3 (max: 10)}") {
			triggered++
		}
	}
	if triggered != 20 {
		t.Errorf("TriggeredScaleUp events = %d, want one per pod (20)", triggered)
	}
	if _, d := readStatus(t, a); d.ScaleUp == nil || d.ScaleUp.NewNodes != 3 {
		t.Errorf("draxr status scale-up = %+v, want the scale-up recorded", d.ScaleUp)
	}
}

// A loop whose context ends (SIGTERM) stops planning and asks the cloud
// for nothing: IncreaseSize is not expected.
func TestCancelledLoopAsksNothing(t *testing.T) {
	a, provider, _, _ := setup(t, unschedulablePods(20)...)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := a.RunOnce(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunOnce = %+v, %v; want context.Canceled", res, err)
	}
}

// One loop asks the chosen group once for every node the plan gives it,
// as CA executes its best option's full node count in one loop.
func TestScaleUpAsksOnceForWholePlan(t *testing.T) {
	tests := []struct {
		pods, wantNodes int
	}{
		{pods: 1, wantNodes: 1},
		{pods: 20, wantNodes: 3},
		{pods: 80, wantNodes: 10}, // the group's max size
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d-pods", tc.pods), func(t *testing.T) {
			a, provider, group, _ := setup(t, unschedulablePods(tc.pods)...)
			provider.EXPECT().Refresh(gomock.Any()).Return(nil)
			group.EXPECT().IncreaseSize(gomock.Any(), tc.wantNodes).Return(nil).Times(1)
			res, err := a.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.ScaleUp == nil || res.ScaleUp.NewNodes != tc.wantNodes || len(res.ScaleUp.Pods) != tc.pods {
				t.Fatalf("scale-up = %+v, want gpu +%d for %d pods", res.ScaleUp, tc.wantNodes, tc.pods)
			}
		})
	}
}

// A provider error is reported (error, event, metric), the group is backed
// off for CA's initial 5 minutes, and after that it is tried again.
func TestProviderErrorBacksOffThenRetries(t *testing.T) {
	a, provider, group, recorder := setup(t, unschedulablePods(4)...)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.cfg.Now = func() time.Time { return now }
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).Times(3)
	gomock.InOrder(
		group.EXPECT().IncreaseSize(gomock.Any(), 1).Return(cloudprovider.OutOfResources("QUOTA_EXCEEDED", "quota exceeded")),
		group.EXPECT().IncreaseSize(gomock.Any(), 1).Return(nil),
	)
	failedLabels := map[string]string{"reason": "QUOTA_EXCEEDED", "gpu_resource_name": "", "gpu_name": "", "dra_drivers": fx.Driver}
	failedBefore := scrape(t, "cluster_autoscaler_failed_scale_ups_total", failedLabels)
	res, err := a.RunOnce(context.Background())
	if failed := scrape(t, "cluster_autoscaler_failed_scale_ups_total", failedLabels); failed != failedBefore+1 {
		t.Errorf("failed_scale_ups_total%v = %v, want %v", failedLabels, failed, failedBefore+1)
	}
	if err == nil || !strings.Contains(err.Error(), "scale up node group gpu by 1: OutOfResource.QUOTA_EXCEEDED: quota exceeded") {
		t.Fatalf("first loop error = %v", err)
	}
	if len(res.FailedScaleUps) != 1 || res.FailedScaleUps[0] != "gpu" {
		t.Errorf("failed scale-ups = %v, want [gpu]", res.FailedScaleUps)
	}
	// As CA: FailedToScaleUpGroup on the status ConfigMap, nothing on
	// the pods but the outcome of planning again without the group.
	notTriggered, groupEvent := 0, false
	for _, e := range events(recorder) {
		if strings.Contains(e, "FailedScaleUp ") {
			t.Errorf("event %q: CA has no FailedScaleUp pod event", e)
		}
		if strings.Contains(e, EventNotTriggerScaleUp) && strings.Contains(e, "gpu (in backoff after failed scale-up") {
			notTriggered++
		}
		groupEvent = groupEvent || strings.Contains(e, "FailedToScaleUpGroup")
	}
	if notTriggered != 4 || !groupEvent {
		t.Errorf("NotTriggerScaleUp events naming the backoff = %d, want 4; FailedToScaleUpGroup seen = %v", notTriggered, groupEvent)
	}

	s, _ := readStatus(t, a)
	if len(s.NodeGroups) != 1 || s.NodeGroups[0].ScaleUp.Status != StatusBackoff || s.NodeGroups[0].ScaleUp.BackoffInfo.ErrorCode != "QUOTA_EXCEEDED" {
		t.Errorf("status node groups = %+v, want gpu in Backoff with the error code", s.NodeGroups)
	}

	now = now.Add(4 * time.Minute) // backed off: not asked again
	res, err = a.RunOnce(context.Background())
	if err != nil || res.ScaleUp != nil {
		t.Fatalf("loop during backoff: %+v, %v; want no scale-up and no error", res, err)
	}
	backedOff := 0
	for _, e := range events(recorder) {
		if strings.Contains(e, "NotTriggerScaleUp") && strings.Contains(e, "gpu (in backoff after failed scale-up") {
			backedOff++
		}
	}
	if backedOff != 4 {
		t.Errorf("NotTriggerScaleUp events naming the backoff = %d, want 4", backedOff)
	}

	now = now.Add(time.Minute + time.Second)
	res, err = a.RunOnce(context.Background())
	if err != nil || res.ScaleUp == nil {
		t.Fatalf("loop after the backoff: %+v, %v; want the scale-up to go through", res, err)
	}
}

func TestRefreshErrorIsReturned(t *testing.T) {
	a, provider, _, _ := setup(t)
	provider.EXPECT().Refresh(gomock.Any()).Return(errors.New("API unavailable"))
	if _, err := a.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "API unavailable") {
		t.Fatalf("RunOnce = %v", err)
	}
}

// A pod no group can hold gets NotTriggerScaleUp with the planner's reason.
func TestNotTriggerScaleUpReason(t *testing.T) {
	giant := fx.Pod("giant", 100, fx.GPUs(fx.GPUResource, 9))
	giant.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
	a, provider, _, recorder := setup(t, giant)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil)
	a.cfg.Now = func() time.Time { return time.Now() }
	if _, err := a.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, e := range events(recorder) {
		if strings.Contains(e, "NotTriggerScaleUp") && strings.Contains(e, "needs 9 example.com/gpu; a gpu node offers 8") {
			return
		}
	}
	t.Fatal("no NotTriggerScaleUp event with the reason")
}

// expectFlagOptions lets a mocked group answer GetOptions with the flags'
// values: it has no overrides of its own.
func expectFlagOptions(group *mocks.MockNodeGroup) {
	group.EXPECT().GetOptions(gomock.Any()).DoAndReturn(func(d cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
		return &d, nil
	}).AnyTimes()
}

// A loop the trigger holds (Config.Hold, looptrigger's early start) asks
// the cloud for nothing when later events supersede it: no IncreaseSize,
// no scale-up events, not productive; one that goes ahead scales up as
// any loop. Hold is asked once, before the first scale-up.
func TestSupersededLoopAsksNothing(t *testing.T) {
	for _, goAhead := range []bool{false, true} {
		t.Run(fmt.Sprintf("go ahead %v", goAhead), func(t *testing.T) {
			a, provider, group, recorder := setup(t, unschedulablePods(20)...)
			provider.EXPECT().Refresh(gomock.Any()).Return(nil)
			holds := 0
			a.cfg.Hold = func(context.Context) bool { holds++; return goAhead }
			if goAhead {
				group.EXPECT().IncreaseSize(gomock.Any(), 3).Return(nil)
			}
			res, err := a.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if holds != 1 {
				t.Errorf("Hold asked %d times, want once", holds)
			}
			scaleUpEvents := 0
			for _, e := range events(recorder) {
				if strings.Contains(e, "TriggeredScaleUp") || strings.Contains(e, "NotTriggerScaleUp") {
					scaleUpEvents++
				}
			}
			if goAhead {
				if res.Superseded || res.ScaleUp == nil || !res.Productive() || scaleUpEvents != 20 {
					t.Errorf("going ahead: superseded %v, scale-up %+v, productive %v, %d scale-up events; want gpu +3 and 20 events",
						res.Superseded, res.ScaleUp, res.Productive(), scaleUpEvents)
				}
				return
			}
			if !res.Superseded || res.ScaleUp != nil || res.Productive() || scaleUpEvents != 0 {
				t.Errorf("superseded: superseded %v, scale-up %+v, productive %v, %d scale-up events; want none",
					res.Superseded, res.ScaleUp, res.Productive(), scaleUpEvents)
			}
		})
	}
}
