package input

import (
	"bytes"
	"fmt"
	"testing"
)

// dumpYAML is a cluster dump as `kubectl get -o yaml` writes one document
// per object (the layout of simulator/offline/testdata/gen): one
// NodeGroup, nodes existing 64-CPU nodes and pods pending one-CPU pods of
// 100 ReplicaSets.
func dumpYAML(nodes, pods int) []byte {
	var w bytes.Buffer
	w.WriteString(`apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata:
  name: cpu
spec:
  minSize: 0
  maxSize: 100000
  template:
    metadata:
      labels:
        node.kubernetes.io/instance-type: c64
    status:
      capacity: {cpu: "64", memory: 256Gi, pods: "110"}
      allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
`)
	for i := 0; i < nodes; i++ {
		fmt.Fprintf(&w, `---
apiVersion: v1
kind: Node
metadata:
  name: node-%03[1]d
  uid: 00000000-0000-0000-0000-%012[1]d
  labels:
    kubernetes.io/hostname: node-%03[1]d
    draxr.dev/node-group: cpu
status:
  capacity: {cpu: "64", memory: 256Gi, pods: "110"}
  allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
  conditions:
  - type: Ready
    status: "True"
`, i)
	}
	for i := 0; i < pods; i++ {
		rs := i % 100
		fmt.Fprintf(&w, `---
apiVersion: v1
kind: Pod
metadata:
  name: web-%03[1]d-%06[2]d
  namespace: default
  uid: 10000000-0000-0000-%04[1]d-%012[2]d
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels:
    app: web-%03[1]d
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: web-%03[1]d
    uid: 20000000-0000-0000-0000-%012[1]d
    controller: true
    blockOwnerDeletion: true
spec:
  containers:
  - name: app
    image: registry.example/web:1.0
    resources:
      requests:
        cpu: "1"
        memory: 256Mi
status:
  phase: Pending
`, rs, i)
	}
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
