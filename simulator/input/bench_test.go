package input

import (
	"bytes"
	"fmt"
	"testing"

	"draxr.dev/draxr/simulator/fixtures"
)

// dumpYAML is fixtures.WriteCPUDump's dump: one NodeGroup, nodes existing
// 64-CPU nodes and pods pending one-CPU pods of 100 ReplicaSets.
func dumpYAML(nodes, pods int) []byte {
	var w bytes.Buffer
	fixtures.WriteCPUDump(&w, nodes, pods, 100)
	return w.Bytes()
}

// BenchmarkDecodeYAML times loading a YAML dump (what `draxr simulate -f`
// does before planning) and asserts every object arrived.
func BenchmarkDecodeYAML(b *testing.B) {
	for _, pods := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("pods-%d", pods), func(b *testing.B) {
			data := dumpYAML(50, pods)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				objs, err := Parse(data, "dump.yaml")
				if err != nil {
					b.Fatal(err)
				}
				if len(objs.PendingPods) != pods || len(objs.Nodes) != 50 || len(objs.NodeGroups) != 1 {
					b.Fatalf("loaded %d pending pods, %d nodes, %d node groups; want %d, 50, 1",
						len(objs.PendingPods), len(objs.Nodes), len(objs.NodeGroups), pods)
				}
			}
			b.ReportMetric(float64(pods), "pods")
		})
	}
}
