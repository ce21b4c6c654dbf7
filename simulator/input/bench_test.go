package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
// does before planning) and asserts every object arrived: one NodeGroup,
// 50 existing 64-CPU nodes and pods pending one-CPU pods of 100
// ReplicaSets, a document each (pods-N) or as one List (list-pods-N).
func BenchmarkDecodeYAML(b *testing.B) {
	for _, shape := range []struct {
		name  string
		write func(w io.Writer, nodes, pods, replicaSets int)
		pods  int
	}{
		{"pods", fixtures.WriteCPUDump, 10000},
		{"pods", fixtures.WriteCPUDump, 100000},
		{"list-pods", fixtures.WriteCPUList, 100000},
	} {
		pods := shape.pods
		b.Run(fmt.Sprintf("%s-%d", shape.name, pods), func(b *testing.B) {
			var w bytes.Buffer
			shape.write(&w, 50, pods, 100)
			data := w.Bytes()
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

// BenchmarkReadTypeMeta is the apiVersion and kind of one List item (a
// pod), read as a List's items are on every core, against encoding/json.
func BenchmarkReadTypeMeta(b *testing.B) {
	item := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1234","namespace":"default","labels":{"app":"web"},` +
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"u","controller":true}]},` +
		`"spec":{"containers":[{"name":"main","image":"nginx","resources":{"requests":{"cpu":"1"}}}]},"status":{"phase":"Pending"}}`)
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		var r typeMetaReader
		for b.Loop() {
			if tm, err := r.read(item); err != nil || tm.Kind != "Pod" {
				b.Fatal(tm, err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var tm typeMeta
			if err := json.Unmarshal(item, &tm); err != nil || tm.Kind != "Pod" {
				b.Fatal(tm, err)
			}
		}
	})
}
