package main

import (
	"strings"
	"testing"
)

// gpuClassDoc maps example.com/gpu to the devices of gpu.example.com.
const gpuClassDoc = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  extendedResourceName: example.com/gpu
  selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
`

const capiGroups = `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: gpus
  namespace: fleet
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "0"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "10"
    capacity.cluster-autoscaler.kubernetes.io/cpu: "32"
    capacity.cluster-autoscaler.kubernetes.io/memory: 128Gi
    draxr.dev/template-resource-slices: |
      - driver: gpu.example.com
        devices: [{name: g0}, {name: g1}, {name: g2}, {name: g3}, {name: g4}, {name: g5}, {name: g6}, {name: g7}]
spec:
  clusterName: c1
  replicas: 0
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata:
  name: gpus-abc
  namespace: fleet
  ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta2, kind: MachineDeployment, name: gpus, uid: "1"}]
spec: {clusterName: c1, replicas: 0}
---
` + gpuClassDoc + `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  replicas: 20
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
      - name: c
        image: busybox
        resources: {limits: {example.com/gpu: 1}}
`

// A MachineDeployment with draxr's template slices is a node group for
// the planner: 20 one-GPU pods on 8-GPU nodes from zero need exactly 3.
func TestSimulateClusterAPIGroups(t *testing.T) {
	plan := simulatePlan(t, "-f", writeFile(t, "capi.yaml", capiGroups))
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "MachineDeployment/fleet/gpus" || plan.ScaleUps[0].NewNodes != 3 || len(plan.ScaleUps[0].Pods) != 20 {
		t.Fatalf("scale-up = %+v, want MachineDeployment/fleet/gpus +3 nodes for 20 pods", plan.ScaleUps)
	}
}

func TestSimulateClusterAPIBadAnnotation(t *testing.T) {
	bad := strings.Replace(capiGroups, `node-group-max-size: "10"`, `node-group-max-size: "ten"`, 1)
	code, _, errOut := draxr(t, "simulate", "-f", writeFile(t, "capi.yaml", bad))
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	want := `capi.yaml: document 1: MachineDeployment fleet/gpus: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "ten" is not an integer`
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
}
