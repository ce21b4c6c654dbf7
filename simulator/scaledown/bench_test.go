package scaledown

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
)

// claimCluster is the Cluster Autoscaler's DRA scale-down shape: nodes of
// 10 devices, each running 4 pods that hold one device through a claim of
// their own (pre-created and named by the pod, or generated from a
// template and owned by the pod), so every node is 40% used and the pods
// fit on 40% of the nodes: 60% are removable.
func claimCluster(t testing.TB, nodes int, generated bool) *placement.Engine {
	t.Helper()
	return copyCluster(t, nodes, generated, nil, nil)
}

// BenchmarkScaleDownClaims finds the removable nodes of claimCluster
// (800 and 8,000 nodes, CA's size and ten times it): 60% of them.
func BenchmarkScaleDownClaims(b *testing.B) {
	for _, nodes := range []int{800, 8000} {
		for _, generated := range []bool{false, true} {
			kind := "named-claims"
			if generated {
				kind = "generated-claims"
			}
			b.Run(fmt.Sprintf("%s-%d-nodes", kind, nodes), func(b *testing.B) {
				want := nodes * 6 / 10
				b.ReportAllocs()
				var cpu time.Duration
				found := 0
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					h := claimCluster(b, nodes, generated)
					runtime.GC()
					before := fx.ProcessCPU()
					b.StartTimer()
					removals, _ := Find(h, Options{UtilizationThreshold: 0.5})
					b.StopTimer()
					cpu += fx.ProcessCPU() - before
					found = len(removals)
					if found != want {
						b.Fatalf("removable = %d, want %d", found, want)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(found), "removable")
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}
