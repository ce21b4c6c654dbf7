package main

import (
	"encoding/json"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/report"
)

// bindingDump: a node whose fabric GPU waits for an "Attached" condition
// before the scheduler binds (KEP-5007), a pod whose claim the scheduler
// allocated there and is waiting on, and a group that could add a node.
const bindingDump = gpuClassDoc + `---
apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: gpu}
spec:
  minSize: 0
  maxSize: 2
  template:
    status: {capacity: {cpu: "32", memory: 128Gi, pods: "110"}}
  resourceSlices:
  - driver: gpu.example.com
    devices: [{name: g0, bindingConditions: [Attached], bindingFailureConditions: [AttachFailed]}]
---
apiVersion: v1
kind: Node
metadata: {name: node-0, labels: {kubernetes.io/hostname: node-0}}
status:
  capacity: {cpu: "32", memory: 128Gi, pods: "110"}
  allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-0-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-0
  pool: {name: node-0, resourceSliceCount: 1}
  devices: [{name: g0, bindingConditions: [Attached], bindingFailureConditions: [AttachFailed]}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: train-gpu, namespace: ml}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    allocationTimestamp: "%s"
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [node-0]}]}]
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: node-0, device: g0, bindingConditions: [Attached], bindingFailureConditions: [AttachFailed]}]
  reservedFor: [{resource: pods, name: train, uid: train-uid}]
  devices: [{driver: gpu.example.com, pool: node-0, device: g0, conditions: [%s]}]
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml, uid: train-uid}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: train-gpu}]
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
`

// A pod whose claim waits for its device's binding conditions is being
// bound on its node: no scale-up, and the plan says so with its own code;
// once a failure condition is true (or the wait timed out) the scheduler
// gives the allocation up, and the pod is pending again: planned afresh
// (here on node-0's device, free again, as the scheduler tries it).
func TestBindingConditionsInThePlan(t *testing.T) {
	plan := func(allocated, conditions string) report.SimulateOutput {
		t.Helper()
		dump := strings.Replace(strings.Replace(bindingDump, "%s", allocated, 1), "%s", conditions, 1)
		code, out, errOut := draxr(t, "simulate", "-o", "json", "-f", writeFile(t, "binding.yaml", dump))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var o report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := plan("2099-01-01T00:00:00Z", "")
	if len(o.ScaleUps) != 0 || len(o.NoScaleUp) != 1 || o.NoScaleUp[0].Code != "WaitingForBindingConditions" ||
		!strings.Contains(o.NoScaleUp[0].Reason, "waiting for device binding conditions on node-0: ResourceClaim ml/train-gpu") {
		t.Errorf("waiting: scale-ups %+v, no scale-up %+v; want none and the pod waiting on node-0", o.ScaleUps, o.NoScaleUp)
	}
	failed := `{type: AttachFailed, status: "True", reason: FabricDown, message: down, lastTransitionTime: "2026-01-01T00:00:00Z"}`
	for name, o := range map[string]report.SimulateOutput{
		"failed":    plan("2099-01-01T00:00:00Z", failed),
		"timed out": plan("2026-01-01T00:00:00Z", ""),
	} {
		if len(o.NoScaleUp) != 0 || len(o.ExistingNodes) != 1 || o.ExistingNodes[0].Node != "node-0" {
			t.Errorf("%s: placed %+v, no scale-up %+v; want the pod pending again, planned on node-0", name, o.ExistingNodes, o.NoScaleUp)
		}
	}
}
