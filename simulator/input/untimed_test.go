package input

import (
	"testing"

	"draxr.dev/draxr/simulator/scaleup"
)

// Pods without a creationTimestamp are queued in the order the input holds
// them (kubectl apply creates them so), after every timed pod; workload
// pods keep no time of the file's.
func TestUntimedPodsInFileOrder(t *testing.T) {
	objs, err := Parse([]byte(`apiVersion: v1
kind: Pod
metadata: {name: zeta, namespace: ml}
spec: {containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: alpha, namespace: ml}
spec: {containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: timed, namespace: ml, creationTimestamp: "2026-03-01T00:00:00Z"}
spec: {containers: [{name: c, image: x}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: ml}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: x}]}}
`), "pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range scaleup.SortSchedulerQueue(objs.PendingPods) {
		order = append(order, p.Name)
	}
	if len(order) != 4 || order[1] != "timed" || order[2] != "zeta" || order[3] != "alpha" {
		t.Errorf("queue order %v, want the ReplicaSet's pod (no time), timed, then zeta and alpha as in the file", order)
	}
}
