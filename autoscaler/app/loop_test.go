package app

import (
	"context"
	"fmt"
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
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/autoscaler/looptrigger"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

type noHealth struct{}

func (noHealth) LoopStarted()   {}
func (noHealth) LoopSucceeded() {}

// loopEnv is the loop as run wires it, on a fake API server and a fake
// clock: the informers, the trigger's handlers, a real autoscaler over a
// mocked one-group provider (8 GPUs a node, up to 10 nodes), and the loops
// running.
type loopEnv struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	clk     *testingclock.FakeClock
	trigger *looptrigger.Trigger
	// loopsDone receives once per loop; scaledUp the IncreaseSize deltas
	// and when they were asked.
	loopsDone chan struct{}
	scaledUp  chan scaleUpCall
}

type scaleUpCall struct {
	at    time.Time
	delta int
}

func newLoopEnv(t *testing.T, pods ...*v1.Pod) *loopEnv {
	t.Helper()
	ctrl := gomock.NewController(t)
	client := fake.NewClientset(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	for _, p := range pods {
		if err := client.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	cluster := liveview.FromInformers(factory)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	trigger := looptrigger.New(looptrigger.Config{ScanInterval: 30 * time.Second, FrequentLoops: true,
		BatchIdle: time.Second, BatchMax: 10 * time.Second}, clk)
	if err := watchLoopEvents(trigger, factory, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	e := &loopEnv{t: t, ctx: ctx, client: client, clk: clk, trigger: trigger,
		loopsDone: make(chan struct{}, 100), scaledUp: make(chan scaleUpCall, 100)}

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
	group.EXPECT().IncreaseSize(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, delta int) error {
		e.scaledUp <- scaleUpCall{clk.Now(), delta}
		return nil
	}).AnyTimes()
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(nil, nil).AnyTimes()
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	exp, _ := expander.New("least-waste", nil, 1)
	a := core.New(core.Config{Client: client, View: cluster, Provider: provider, Expander: exp, Recorder: record.NewFakeRecorder(10000)})

	done := make(chan struct{})
	go func() {
		defer close(done)
		runLoops(ctx, trigger, noHealth{}, func(ctx context.Context) (*core.LoopResult, error) {
			res, err := a.RunOnce(ctx)
			e.loopsDone <- struct{}{}
			return res, err
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	<-e.loopsDone // the first loop, at once
	return e
}

// markUnschedulable writes the scheduler's Unschedulable condition on pod
// and waits until the trigger has seen it: the next loop is then due one
// idle window after now.
func (e *loopEnv) markUnschedulable(pod *v1.Pod) {
	e.t.Helper()
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
		LastTransitionTime: metav1.NewTime(e.clk.Now())}}
	if _, err := e.client.CoreV1().Pods(pod.Namespace).UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitForEvent(pod.Name)
}

// waitForEvent waits until the trigger has seen an event now about the
// named pod: the next loop is then due one idle window after now.
func (e *loopEnv) waitForEvent(pod string) {
	e.t.Helper()
	want := e.clk.Now().Add(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		due, reason := e.trigger.Next()
		if reason == looptrigger.Events && due.Equal(want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no event about %s reached the trigger: next loop %v (%s), want %v", pod, due, reason, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// runDueLoop moves the clock to the next loop and waits for it to end.
func (e *loopEnv) runDueLoop() {
	e.t.Helper()
	due, _ := e.trigger.Next()
	e.clk.SetTime(due)
	select {
	case <-e.loopsDone:
	case <-time.After(10 * time.Second):
		e.t.Fatal("no loop within 10s of real time")
	}
}

// scaleUps are the IncreaseSize calls so far.
func (e *loopEnv) scaleUps() []scaleUpCall {
	var out []scaleUpCall
	for {
		select {
		case c := <-e.scaledUp:
			out = append(out, c)
		default:
			return out
		}
	}
}

func gpuPods(n int) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		out = append(out, fx.Pod(fmt.Sprintf("train-%d", i), 100, fx.GPUs(fx.GPUResource, 1)))
	}
	return out
}

// With a 30s scan interval, a pod the scheduler finds unschedulable gets
// its IncreaseSize one idle window (1s) later, not at the next scan: the
// whole path from the pod's status write through the informer, the
// trigger and the loop.
func TestUnschedulablePodStartsALoop(t *testing.T) {
	pods := gpuPods(1)
	e := newLoopEnv(t, pods...)
	e.clk.Step(3 * time.Second)
	unschedulableAt := e.clk.Now()
	e.markUnschedulable(pods[0])
	e.runDueLoop()
	got := e.scaleUps()
	if len(got) != 1 || got[0].delta != 1 || got[0].at.Sub(unschedulableAt) != time.Second {
		t.Errorf("IncreaseSize calls %+v, want +1 one second after the pod was found unschedulable (the scan interval is 30s)", got)
	}
}

// A Job's 80 pods found unschedulable over 4s make one batch: one loop,
// one IncreaseSize for all of them, a second after the last.
func TestBurstMakesOneScaleUp(t *testing.T) {
	pods := gpuPods(80)
	e := newLoopEnv(t, pods...)
	for _, p := range pods {
		e.clk.Step(50 * time.Millisecond)
		e.markUnschedulable(p)
	}
	last := e.clk.Now()
	e.runDueLoop()
	got := e.scaleUps()
	if len(got) != 1 || got[0].delta != 10 || got[0].at.Sub(last) != time.Second {
		t.Errorf("IncreaseSize calls %+v, want one of +10 (80 one-GPU pods, 8 GPUs a node) one second after the last pod", got)
	}
}

// A Job whose controller is still creating its 80 pods when the scheduler
// finds the first ones unschedulable: each pod created beside a marked
// sibling keeps the batch open, so the loop runs once the last is there
// and asks for all of them at once, not for those marked so far and then
// for the rest.
func TestBurstStillBeingCreatedMakesOneScaleUp(t *testing.T) {
	job := &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-train", Controller: ptr.To(true)}
	pods := gpuPods(80)
	for _, p := range pods {
		p.OwnerReferences = []metav1.OwnerReference{*job}
	}
	e := newLoopEnv(t, pods[:8]...)
	for _, p := range pods[:8] {
		e.markUnschedulable(p)
	}
	for _, p := range pods[8:] {
		e.clk.Step(50 * time.Millisecond)
		if _, err := e.client.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitForEvent(p.Name)
	}
	last := e.clk.Now()
	e.runDueLoop()
	got := e.scaleUps()
	if len(got) != 1 || got[0].delta != 10 || got[0].at.Sub(last) != time.Second {
		t.Errorf("IncreaseSize calls %+v, want one of +10 (80 one-GPU pods, 8 GPUs a node) one second after the last pod was created", got)
	}
}
