package offline_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
)

// clusterShape is a benchmark's input: existing empty 64-CPU nodes, one
// 64-CPU node group and the pending pods.
type clusterShape struct {
	name          string
	existingNodes int
	pods          func() []*v1.Pod
	// wantNodes is what the plan must add, reasoned by hand: one-CPU pods
	// fill the existing nodes (64 each), the rest packs 64 per new node.
	wantNodes int
}

// BenchmarkSimulate runs the whole `draxr simulate` path from decoded
// objects to the plan (snapshot build, placement engine, plan) on cluster-sized
// inputs and asserts the node count, so a faster wrong plan cannot pass.
func BenchmarkSimulate(b *testing.B) {
	shapes := []clusterShape{
		// 100 ReplicaSets of 100 one-CPU pods: 3,200 on the 50 nodes,
		// 6,800 / 64 = 106.25 -> 107 new nodes.
		{name: "cpu-10000", existingNodes: 50, pods: func() []*v1.Pod { return replicaSetPods(100, 100) }, wantNodes: 107},
		// 100 ReplicaSets of 1,000: 96,800 / 64 = 1,512.5 -> 1,513.
		{name: "cpu-100000", existingNodes: 50, pods: func() []*v1.Pod { return replicaSetPods(100, 1000) }, wantNodes: 1513},
		// Every pod its own kind (no owner, its own memory request), one
		// CPU each: 16,800 / 64 = 262.5 -> 263.
		{name: "distinct-20000", existingNodes: 50, pods: func() []*v1.Pod { return distinctPods(20000) }, wantNodes: 263},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			b.ReportAllocs()
			var nodes int
			var peak uint64
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				objs := clusterObjects(shape)
				runtime.GC()
				stopPeak := watchHeapPeak()
				cpuBefore := fx.ProcessCPU()
				b.StartTimer()
				res, err := offline.Simulate(context.Background(), objs, offline.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += fx.ProcessCPU() - cpuBefore
				peak = max(peak, stopPeak())
				nodes = 0
				for _, su := range res.Plan.ScaleUps {
					nodes += su.NewNodes
				}
				placed := len(res.Plan.ExistingNodes)
				if nodes != shape.wantNodes || len(res.Plan.NoScaleUp) != 0 || placed != 64*shape.existingNodes {
					b.Fatalf("%s: %d new nodes, %d pods on existing nodes, %d left out; want %d new, %d on existing, none left out",
						shape.name, nodes, placed, len(res.Plan.NoScaleUp), shape.wantNodes, 64*shape.existingNodes)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			// CPU time (all threads, GC included) says what a plan costs
			// on a machine shared with other work, where wall time does not.
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// watchHeapPeak samples the live heap until the returned function is
// called, which returns the largest sample. Sampling every few
// milliseconds misses short spikes; it is a floor, not an exact peak.
func watchHeapPeak() func() uint64 {
	done := make(chan struct{})
	result := make(chan uint64)
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

func clusterObjects(shape clusterShape) *input.Objects {
	objs := &input.Objects{}
	for i := 0; i < shape.existingNodes; i++ {
		n := fx.Node(fmt.Sprintf("node-%03d", i), 64, 256, nil)
		n.Labels[nodegroup.GroupLabel] = "cpu"
		objs.Nodes = append(objs.Nodes, n)
	}
	objs.NodeGroups = []*nodegroup.NodeGroup{{
		ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec:       nodegroup.Spec{MaxSize: 10000, Template: *fx.Node("template", 64, 256, nil)},
	}}
	objs.PendingPods = shape.pods()
	return objs
}

// replicaSetPods makes sets ReplicaSets of perSet one-CPU pods each, as a
// dump shows them: owned by their ReplicaSet, created in one second.
func replicaSetPods(sets, perSet int) []*v1.Pod {
	created := metav1.NewTime(fx.Epoch)
	pods := make([]*v1.Pod, 0, sets*perSet)
	for s := 0; s < sets; s++ {
		rs := fmt.Sprintf("web-%03d", s)
		for i := 0; i < perSet; i++ {
			p := fx.Pod(fmt.Sprintf("%s-%05d", rs, i), 1000, nil)
			p.CreationTimestamp = created
			p.Labels = map[string]string{"app": rs}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID("rs-" + rs), Controller: ptr.To(true)}}
			pods = append(pods, p)
		}
	}
	return pods
}

// distinctPods makes n one-CPU pods with no owner, each asking for its
// own amount of memory (64Mi plus i KiB): no two are alike.
func distinctPods(n int) []*v1.Pod {
	created := metav1.NewTime(fx.Epoch)
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := fx.Pod(fmt.Sprintf("job-%05d", i), 1000, nil)
		p.CreationTimestamp = created
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(64<<20+int64(i)<<10, resource.BinarySI)
		pods[i] = p
	}
	return pods
}
