package core

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/view"
)

// fleetShape is a live cluster for BenchmarkRunOnce: GPU nodes full of
// one-GPU pods (each with its allocated extended-resource claim), CPU
// nodes running plain pods, and pending one-GPU pods.
type fleetShape struct {
	name                  string
	gpuNodes, cpuNodes    int
	cpuPodsPerNode        int
	emptyGPUNodes         int
	busyGPUNodes          int // GPUs free, CPUs taken by cpuPodsPerNode pods of 6 CPUs
	pending               int
	wantNodes, groupLimit int
}

// BenchmarkRunOnce times one loop of the live controller, from synced
// informers to the provider's IncreaseSize, and asserts the nodes asked
// for, so a faster wrong loop cannot pass.
func BenchmarkRunOnce(b *testing.B) {
	shapes := []fleetShape{
		// 2,500 GPU nodes x 8 one-GPU pods + 2,500 CPU nodes x 10 plain pods
		// = 45,000 running. The GPU nodes are full and CPU nodes have no
		// GPUs, so the 5,000 pending one-GPU pods need 5,000 / 8 = 625 new
		// 8-GPU nodes.
		{name: "5000-nodes-50000-pods", gpuNodes: 2500, cpuNodes: 2500, cpuPodsPerNode: 10, pending: 5000,
			wantNodes: 625, groupLimit: 1000},
		// fleet-room (issue 56): 5,000 8-GPU nodes with every GPU free and
		// 10,000 pending one-GPU pods, which all fit there: no IncreaseSize.
		// The cost is placing each pod where the scheduler would.
		{name: "fleet-room", emptyGPUNodes: 5000, pending: 10000, groupLimit: 1000},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			ctx, client, listers, exp := fleetClient(b, shape)
			provider, requested := benchProvider(b, shape.groupLimit)

			b.ReportAllocs()
			var peak uint64
			var cpu float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// A fresh autoscaler each time: the previous loop's scale-up
				// would otherwise count as upcoming nodes.
				a := New(Config{Client: client, View: listers, Provider: provider, Expander: exp,
					Recorder: &record.FakeRecorder{}, StatusNamespace: "kube-system"})
				*requested = nil
				runtime.GC()
				stopPeak := watchHeapPeak()
				b.StartTimer()
				before := fx.ProcessCPU()
				res, err := a.RunOnce(ctx)
				cpu += (fx.ProcessCPU() - before).Seconds()
				b.StopTimer()
				peak = max(peak, stopPeak())
				if err != nil {
					b.Fatal(err)
				}
				if shape.wantNodes == 0 {
					if len(*requested) != 0 || res.Unschedulable != shape.pending {
						b.Fatalf("IncreaseSize calls %v for %d unschedulable pods; want none for %d pods that fit the fleet",
							*requested, res.Unschedulable, shape.pending)
					}
				} else if len(*requested) != 1 || (*requested)[0] != shape.wantNodes || res.Unschedulable != shape.pending {
					b.Fatalf("IncreaseSize calls %v for %d unschedulable pods; want one call for %d nodes, %d pods",
						*requested, res.Unschedulable, shape.wantNodes, shape.pending)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(shape.wantNodes), "nodes")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
		})
	}
}

// BenchmarkRunOnceSteady times a loop with nothing to do on a full fleet
// (5,000 nodes, 45,000 running pods, scale-down on): the loop a large
// cluster runs most of the time. One autoscaler runs every loop, as in
// the live controller, so what it carries from loop to loop counts.
func BenchmarkRunOnceSteady(b *testing.B) {
	shape := fleetShape{gpuNodes: 2500, cpuNodes: 2500, cpuPodsPerNode: 10}
	ctx, _, _, a, requested := longLivedAutoscaler(b, shape)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := a.RunOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(*requested) != 0 || res.Unschedulable != 0 || res.ScaleUp != nil {
			b.Fatalf("a loop with nothing to do asked for nodes %v (%d unschedulable pods)", *requested, res.Unschedulable)
		}
	}
}

// BenchmarkRunOnceNewPod times the loop the live reaction benchmark
// waits for: on the full fleet of BenchmarkRunOnceSteady, one new pod
// that needs a new 8-GPU node. Between loops the previous pod's node
// joins, full, and a new pod arrives, as in the live rounds, so the
// objects a long-lived autoscaler carries from loop to loop change as
// they do there.
func BenchmarkRunOnceNewPod(b *testing.B) {
	shape := fleetShape{gpuNodes: 2500, cpuNodes: 2500, cpuPodsPerNode: 10}
	if os.Getenv("BENCH_LIVE_SHAPE") == "1" {
		shape = fleetShape{busyGPUNodes: 5000, cpuPodsPerNode: 10}
	}
	ctx, client, listers, a, requested := longLivedAutoscaler(b, shape)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if i > 0 {
			if err := client.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("round-%d", i-1), metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
			createObjects(ctx, b, client, fullGPUNode(fmt.Sprintf("joined-%d", i-1)))
		}
		pod := fx.Pod(fmt.Sprintf("round-%d", i), 8000, fx.GPUs(fx.GPUResource, 8))
		pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
		createObjects(ctx, b, client, []k8sruntime.Object{pod})
		waitForInformers(b, listers, pod.Name, 2500+2500+i)
		*requested = nil
		b.StartTimer()
		res, err := a.RunOnce(ctx)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if len(*requested) != 1 || (*requested)[0] != 1 || res.Unschedulable != 1 {
			b.Fatalf("round %d: IncreaseSize calls %v for %d unschedulable pods; want one call for 1 node", i, *requested, res.Unschedulable)
		}
		b.StartTimer()
	}
}

// longLivedAutoscaler is an autoscaler (scale-down on) over the shape's
// objects that has run its first loop, which writes the status and fills
// what later loops reuse, with its API client and view.
func longLivedAutoscaler(b *testing.B, shape fleetShape) (context.Context, *fake.Clientset, view.View, *Autoscaler, *[]int) {
	ctx, client, listers, exp := fleetClient(b, shape)
	provider, requested := benchProvider(b, 1000)
	a := New(Config{Client: client, View: listers, Provider: provider, Expander: exp,
		Recorder: &record.FakeRecorder{}, StatusNamespace: "kube-system",
		ScaleDown: ScaleDownConfig{Enabled: true, UtilizationThreshold: 0.5}})
	if _, err := a.RunOnce(ctx); err != nil {
		b.Fatal(err)
	}
	return ctx, client, listers, a, requested
}

// createObjects creates the objects through the fake API server.
func createObjects(ctx context.Context, b *testing.B, client *fake.Clientset, objs []k8sruntime.Object) {
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Node:
			_, err = client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceSlice:
			_, err = client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaim:
			_, err = client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("cannot create a %T", o)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// waitForInformers waits until the informers hold the pod and the nodes.
func waitForInformers(b *testing.B, listers view.View, pod string, nodes int) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		_, err := listers.Pods.Pods("default").Get(pod)
		all, _ := listers.Nodes.List(labels.Everything())
		if err == nil && len(all) == nodes {
			return
		}
	}
	b.Fatalf("the informers do not hold pod %s and %d nodes after 30s", pod, nodes)
}

// fleetClient serves the shape's objects from a fake API server through
// synced informers, until the benchmark ends.
func fleetClient(b *testing.B, shape fleetShape) (context.Context, *fake.Clientset, view.View, expander.Strategy) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(fleetObjects(shape)...)
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx ends.
	b.Cleanup(func() { cancel(); factory.Shutdown() })
	exp, err := expander.New("least-waste", nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	return ctx, client, listers, exp
}

// benchProvider is one 8-GPU DRA group that records each IncreaseSize.
func benchProvider(b *testing.B, maxSize int) (cloudprovider.Provider, *[]int) {
	ctrl := gomock.NewController(b)
	group := mocks.NewMockNodeGroup(ctrl)
	expectFlagOptions(group)
	tmpl, slices := (&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{Template: *fx.Node("t", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}).NewNode("template-gpu")
	requested := &[]int{}
	group.EXPECT().Id().Return("gpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(maxSize).AnyTimes()
	group.EXPECT().TargetSize().Return(0, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(tmpl, slices, nil).AnyTimes()
	group.EXPECT().Nodes().Return(nil, nil).AnyTimes()
	group.EXPECT().IncreaseSize(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, delta int) error {
		*requested = append(*requested, delta)
		return nil
	}).AnyTimes()
	provider := mocks.NewMockProvider(ctrl)
	provider.EXPECT().Refresh(gomock.Any()).Return(nil).AnyTimes()
	provider.EXPECT().NodeGroups().Return([]cloudprovider.NodeGroup{group}).AnyTimes()
	provider.EXPECT().NodeGroupForNode(gomock.Any()).Return(nil, nil).AnyTimes()
	return provider, requested
}

// fleetObjects builds the shape's API objects.
func fleetObjects(s fleetShape) []k8sruntime.Object {
	objs := []k8sruntime.Object{fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch)}
	for n := 0; n < s.gpuNodes; n++ {
		objs = append(objs, fullGPUNode(fmt.Sprintf("gpu-node-%d", n))...)
	}
	for n := 0; n < s.emptyGPUNodes; n++ {
		node := fmt.Sprintf("free-gpu-node-%d", n)
		objs = append(objs, fx.Node(node, 64, 256, nil), versionedGPUSlice(node))
	}
	for n := 0; n < s.busyGPUNodes; n++ {
		node := fmt.Sprintf("busy-gpu-node-%d", n)
		objs = append(objs, fx.Node(node, 64, 256, nil), versionedGPUSlice(node))
		for i := 0; i < s.cpuPodsPerNode; i++ {
			objs = append(objs, runningOn(fx.Pod(fmt.Sprintf("%s-web-%d", node, i), 6000, nil), node))
		}
	}
	for n := 0; n < s.cpuNodes; n++ {
		node := fmt.Sprintf("cpu-node-%d", n)
		objs = append(objs, fx.Node(node, 32, 128, nil))
		for i := 0; i < s.cpuPodsPerNode; i++ {
			objs = append(objs, runningOn(fx.Pod(fmt.Sprintf("%s-web-%d", node, i), 1000, nil), node))
		}
	}
	for i := 0; i < s.pending; i++ {
		p := fx.Pod(fmt.Sprintf("train-%d", i), 100, fx.GPUs(fx.GPUResource, 1))
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
		objs = append(objs, p)
	}
	return objs
}

// fullGPUNode is an 8-GPU node running eight one-GPU pods, each with its
// allocated extended-resource claim.
func fullGPUNode(node string) []k8sruntime.Object {
	objs := []k8sruntime.Object{fx.Node(node, 64, 256, nil), versionedGPUSlice(node)}
	for d := 0; d < 8; d++ {
		pod := runningOn(fx.Pod(fmt.Sprintf("%s-gpu-%d", node, d), 100, fx.GPUs(fx.GPUResource, 1)), node)
		claim := fx.ExtendedResourceClaim(pod, "gpu.example.com", fx.Driver, node, 1, fmt.Sprintf("gpu-%d", d))
		claim.ResourceVersion = "1" // as the pods'
		pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: claim.Name,
			RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "main",
				ResourceName: string(fx.GPUResource), RequestName: claim.Spec.Devices.Requests[0].Name}}}
		objs = append(objs, pod, claim)
	}
	return objs
}

// versionedGPUSlice is the node's 8-GPU slice as an API server serves it,
// with a resourceVersion.
func versionedGPUSlice(node string) *resourceapi.ResourceSlice {
	s := fx.GPUSlice(node, 8)
	s.ResourceVersion = "1"
	return s
}

// runningOn binds p to node, running, as the API server serves it
// (informers' pods carry a resourceVersion).
func runningOn(p *v1.Pod, node string) *v1.Pod {
	p.Spec.NodeName = node
	p.ResourceVersion = "1"
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
	return p
}

// watchHeapPeak samples the live heap until the returned function is
// called, which returns the largest sample (a floor: short spikes between
// samples are missed).
func watchHeapPeak() func() uint64 {
	done, result := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-result
	}
}
