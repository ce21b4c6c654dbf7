package core

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/mock/gomock"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/mocks"
	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/scaledown"
)

// BenchmarkCARows holds every row of the Cluster Autoscaler's RunOnce
// benchmarks (its core/bench) at the sizes docs/performance.md compares,
// each from the same cluster CA's scenario builds, so the two can run
// side by side:
//
//   - claims-N-nodes: CA's DRA scale-up (BenchmarkRunOnceScaleUpDRA, 500
//     nodes; 100 too): no nodes, one 8-device group, N*8 pending pods each
//     naming a pre-created one-device claim of its own: N nodes.
//   - extended-resource-N-nodes: the same pods asking example.com/gpu: 1,
//     a DeviceClass's extended resource (KEP-5004), at 500, 2,000 and
//     5,000 nodes: N nodes (CA asks for fewer: it does not allocate the
//     devices behind the extended resource).
//   - scale-down-N-nodes: CA's DRA scale-down (BenchmarkRunOnceScaleDownDRA,
//     800 nodes; 200 too): 10-device nodes running 4 one-device claim pods
//     each, both parallelisms 2,000: 60% removable.
//   - plain-1000-nodes: CA's plain scale-up (BenchmarkRunOnceScaleUp): no
//     nodes, one group of 10-CPU nodes, 50,000 pending pods of 200m: 1,000
//     nodes.
//
// Each asserts its answer and reports process CPU per loop (cpu-s/op),
// which holds on a shared machine where wall time does not, and the CPU
// of the full collection after the loop (collect-cpu-s/op): a loop
// that allocates less than the heap's headroom runs no collection of its
// own, so cpu-s/op alone would leave its garbage uncounted; the sum is
// the loop charged one full collection, more than its share.
func BenchmarkCARows(b *testing.B) {
	for _, nodes := range []int{100, 500} {
		caScaleUpRow(b, fmt.Sprintf("claims-%d-nodes", nodes), nodes*8, nodes, func() []k8sruntime.Object {
			return ownClaimObjects(0, nodes*8, false)
		}, func(b *testing.B) (cloudprovider.Provider, *[]int) { return benchProvider(b, 2*nodes) })
	}
	for _, nodes := range []int{500, 2000, 5000} {
		caScaleUpRow(b, fmt.Sprintf("extended-resource-%d-nodes", nodes), nodes*8, nodes, func() []k8sruntime.Object {
			return fleetObjects(fleetShape{pending: nodes * 8})
		}, func(b *testing.B) (cloudprovider.Provider, *[]int) { return benchProvider(b, 2*nodes) })
	}
	for _, nodes := range []int{200, 800} {
		caScaleDownRow(b, fmt.Sprintf("scale-down-%d-nodes", nodes), nodes, false)
	}
	caScaleUpRow(b, "plain-1000-nodes", 50000, 1000, func() []k8sruntime.Object {
		objs := make([]k8sruntime.Object, 0, 50000)
		for i := range 50000 {
			p := fx.Pod(fmt.Sprintf("web-%d", i), 200, nil)
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
			objs = append(objs, p)
		}
		return objs
	}, func(b *testing.B) (cloudprovider.Provider, *[]int) { return cpuBenchProvider(b, 10000) })
}

// caScaleUpRow times one RunOnce from synced informers to IncreaseSize
// and asserts one call for wantNodes with every pending pod counted.
func caScaleUpRow(b *testing.B, name string, pending, wantNodes int, objs func() []k8sruntime.Object,
	newProvider func(*testing.B) (cloudprovider.Provider, *[]int)) {
	b.Run(name, func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		client := fake.NewClientset(objs()...)
		factory := informers.NewSharedInformerFactory(client, 0)
		listers := liveview.FromInformers(factory)
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		defer func() { cancel(); factory.Shutdown() }()
		provider, requested := newProvider(b)
		exp, err := expander.New("least-waste", nil, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		var cpu, collect time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			a := New(Config{Client: client, View: listers, Provider: provider, Expander: exp,
				Recorder: &record.FakeRecorder{}, StatusNamespace: "kube-system"})
			*requested = nil
			// The collection before each loop is of the previous loop's
			// garbage (the first one's, of the set-up's).
			if gc := collectCPU(); i > 0 {
				collect += gc
			}
			before := fx.ProcessCPU()
			b.StartTimer()
			res, err := a.RunOnce(ctx)
			b.StopTimer()
			cpu += fx.ProcessCPU() - before
			if err != nil {
				b.Fatal(err)
			}
			if len(*requested) != 1 || (*requested)[0] != wantNodes || res.Unschedulable != pending {
				b.Fatalf("IncreaseSize calls %v for %d unschedulable pods; want one call for %d nodes, %d pods",
					*requested, res.Unschedulable, wantNodes, pending)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64((*requested)[0]), "nodes")
		collect += collectCPU() // the last loop's
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(collect.Seconds()/float64(b.N), "collect-cpu-s/op")
	})
}

// caScaleDownRow is one scale-down decision on CA's DRA scenario at any
// size (claims named by the pods, or generated from a template), with
// its options, asserting the removable count.
func caScaleDownRow(b *testing.B, name string, nodes int, generated bool) {
	b.Run(name, func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		client := fake.NewClientset(scaleDownClaimObjects(nodes, generated)...)
		factory := informers.NewSharedInformerFactory(client, 0)
		listers := liveview.FromInformers(factory)
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		defer func() { cancel(); factory.Shutdown() }()
		provider := scaleDownBenchProvider(b, nodes)
		const parallelism = 2000
		want := min(nodes*6/10, 2*parallelism)
		b.ReportAllocs()
		var cpu, collect time.Duration
		removable := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			a := New(Config{Client: client, View: listers, Provider: provider, Recorder: &record.FakeRecorder{},
				StatusNamespace: "kube-system", ScaleDown: ScaleDownConfig{Enabled: true, UtilizationThreshold: 0.5,
					ScaleDownActuation: ScaleDownActuation{MaxScaleDownParallelism: parallelism, MaxDrainParallelism: parallelism}}})
			// The collection before each loop is of the previous loop's
			// garbage (the first one's, of the set-up's).
			if gc := collectCPU(); i > 0 {
				collect += gc
			}
			before := fx.ProcessCPU()
			b.StartTimer()
			verdicts, err := a.ExplainScaleDown(ctx)
			b.StopTimer()
			cpu += fx.ProcessCPU() - before
			if err != nil {
				b.Fatal(err)
			}
			removable = 0
			for _, v := range verdicts {
				if v.Verdict == scaledown.Removable {
					removable++
				}
			}
			if removable != want || len(verdicts) != nodes {
				b.Fatalf("%d removable of %d verdicts, want %d of %d", removable, len(verdicts), want, nodes)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(removable), "removable")
		collect += collectCPU() // the last loop's
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(collect.Seconds()/float64(b.N), "collect-cpu-s/op")
	})
}

// cpuBenchProvider is one group of 10-CPU nodes (CA's plain scenario's
// template: 50 of its pods fill one) that records each IncreaseSize.
func cpuBenchProvider(b *testing.B, maxSize int) (cloudprovider.Provider, *[]int) {
	ctrl := gomock.NewController(b)
	group := mocks.NewMockNodeGroup(ctrl)
	expectFlagOptions(group)
	requested := &[]int{}
	group.EXPECT().Id().Return("cpu").AnyTimes()
	group.EXPECT().MinSize().Return(0).AnyTimes()
	group.EXPECT().MaxSize().Return(maxSize).AnyTimes()
	group.EXPECT().TargetSize().Return(0, nil).AnyTimes()
	group.EXPECT().TemplateNodeInfo().Return(fx.Node("template-cpu", 10, 64, nil), nil, nil).AnyTimes()
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

// collectCPU is the process CPU of a full collection now.
func collectCPU() time.Duration {
	before := fx.ProcessCPU()
	runtime.GC()
	return fx.ProcessCPU() - before
}
