// Command gen writes a cluster dump for measuring `draxr simulate -f` and
// `draxr capacity -f` at scale (see docs/performance.md): existing 64-CPU
// nodes, one 64-CPU NodeGroup and pending one-CPU pods of many
// ReplicaSets, as `kubectl get -o yaml` shows them, one document each.
//
//	go run ./simulator/offline/testdata/gen -pods 60000 > /tmp/cluster.yaml
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
)

func main() {
	pods := flag.Int("pods", 60000, "pending pods")
	sets := flag.Int("replicasets", 100, "ReplicaSets the pods belong to")
	nodes := flag.Int("nodes", 50, "existing 64-CPU nodes")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprint(w, `apiVersion: draxr.dev/v1alpha1
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
	for i := 0; i < *nodes; i++ {
		fmt.Fprintf(w, `---
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
	for i := 0; i < *pods; i++ {
		rs := i % *sets
		fmt.Fprintf(w, `---
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
}
