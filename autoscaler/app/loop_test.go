package app

import (
	"context"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/looptrigger"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/view"
)

type noHealth struct{}

func (noHealth) LoopStarted()   {}
func (noHealth) LoopSucceeded() {}

// With a 30s scan interval, a pod the scheduler finds unschedulable gets
// its IncreaseSize one idle window (1s) later, not at the next scan: the
// whole path from the pod's status write through the informer, the
// trigger and the loop, on a fake API server and a fake clock.
func TestUnschedulablePodStartsALoop(t *testing.T) {
	ctrl := gomock.NewController(t)
	pod := fx.Pod("train-0", 100, fx.GPUs(fx.GPUResource, 1))
	client := fake.NewClientset(pod, fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	factory := informers.NewSharedInformerFactory(client, 0)
	cluster := view.FromInformers(factory)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	trigger := looptrigger.New(looptrigger.Config{ScanInterval: 30 * time.Second, FrequentLoops: true,
		BatchIdle: time.Second, BatchMax: 10 * time.Second}, clk)
	if err := watchLoopEvents(trigger, factory, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	group := mocks.NewMockNodeGroup(ctrl)
	tmpl, slices := (&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{Template: *fx.Node("t", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}).NewNode("template-gpu")
	group.EXPECT().GetOptions(gomock.Any()).DoAndReturn(func(d cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
		return &d, nil
	}).AnyTimes()
	group.EXPECT().Id().Return("gpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(10).AnyTimes()
	group.EXPECT().TargetSize().Return(0, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(tmpl, slices, nil).AnyTimes()
	group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
	scaledAt := make(chan time.Time, 1)
	group.EXPECT().IncreaseSize(gomock.Any(), 1).DoAndReturn(func(context.Context, int) error {
		scaledAt <- clk.Now()
		return nil
	}).Times(1)
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(nil, nil).AnyTimes()
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	exp, _ := expander.New("least-waste", nil, 1)
	a := core.New(core.Config{Client: client, View: cluster, Provider: provider, Expander: exp, Recorder: record.NewFakeRecorder(1000)})

	loopsDone := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runLoops(ctx, trigger, noHealth{}, func(ctx context.Context) (*core.LoopResult, error) {
			res, err := a.RunOnce(ctx)
			loopsDone <- struct{}{}
			return res, err
		})
	}()
	<-loopsDone // the first loop: the scheduler has not tried the pod yet

	clk.Step(3 * time.Second)
	unschedulableAt := clk.Now()
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
		LastTransitionTime: metav1.NewTime(unschedulableAt)}}
	if _, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The status write reaches the trigger through the informer: the next
	// loop is then due for events, not at the scan.
	deadline := time.Now().Add(10 * time.Second)
	due, reason := trigger.Next()
	for reason != looptrigger.Events {
		if time.Now().After(deadline) {
			t.Fatalf("the pod's Unschedulable condition started no batch: next loop %v (%s)", due, reason)
		}
		time.Sleep(time.Millisecond)
		due, reason = trigger.Next()
	}
	clk.SetTime(due)
	select {
	case at := <-scaledAt:
		if got := at.Sub(unschedulableAt); got != time.Second {
			t.Errorf("IncreaseSize %v after the pod was found unschedulable, want the 1s idle window (the scan interval is 30s)", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no IncreaseSize within 10s of real time")
	}
	cancel()
	<-done
}
