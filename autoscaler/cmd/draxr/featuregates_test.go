package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"draxr.dev/draxr/simulator/report"
)

// A group whose every device carries a NoSchedule taint: with
// DRADeviceTaints (GA, on by default in v1.37) the allocator skips them;
// turned off, the taints are ignored.
const taintedGroup = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  extendedResourceName: example.com/gpu
  selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
---
apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: gpu-tainted}
spec:
  minSize: 0
  maxSize: 3
  template:
    status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
  resourceSlices:
  - driver: gpu.example.com
    devices:
    - {name: g0, taints: [{key: example.com/maintenance, value: "true", effect: NoSchedule}]}
    - {name: g1, taints: [{key: example.com/maintenance, value: "true", effect: NoSchedule}]}
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers: [{name: main, image: x, resources: {limits: {example.com/gpu: "1"}}}]
`

// --feature-gates changes what the scheduler's plugins do, so the plan
// changes with it, and the output says which gates were set.
func TestFeatureGates(t *testing.T) {
	// draxr sets the gates in this process: restore the defaults after
	// (cleanups run last first: DRADeviceTaints, then the rules that
	// depend on it).
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaintRules, true)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaints, true)
	input := writeFile(t, "tainted.yaml", taintedGroup)
	code, out, errOut := draxr(t, "simulate", "-o", "json", "-f", input)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var on report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &on); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = draxr(t, "simulate", "-o", "json", "-f", input, "--feature-gates=DRADeviceTaints=false,DRADeviceTaintRules=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var off report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &off); err != nil {
		t.Fatal(err)
	}
	if v, ok := off.FeatureGates["DRADeviceTaints"]; !ok || v || len(off.FeatureGates) != 2 || on.FeatureGates != nil {
		t.Errorf("featureGates on %v, off %v; want only the second to list DRADeviceTaints=false and DRADeviceTaintRules=false", on.FeatureGates, off.FeatureGates)
	}
	helped := func(o report.SimulateOutput, group string) int {
		for _, su := range o.ScaleUps {
			if su.NodeGroup == group {
				return len(su.Pods)
			}
		}
		return 0
	}
	// With device taints honoured no device of the group is usable; with
	// the gate off the taints are ignored and the group helps the pod.
	if helped(on, "gpu-tainted") != 0 || helped(off, "gpu-tainted") != 1 {
		t.Errorf("pods helped by gpu-tainted: %d with the gate, %d without; want none, then one", helped(on, "gpu-tainted"), helped(off, "gpu-tainted"))
	}

	code, out, _ = draxr(t, "simulate", "-f", input, "--feature-gates=DRADeviceTaints=false,DRADeviceTaintRules=false")
	if code != 0 || !strings.Contains(out, "DRADeviceTaints=false") {
		t.Errorf("exit %d, table does not name the gate:\n%s", code, out)
	}
	code, _, errOut = draxr(t, "simulate", "--feature-gates=DRAExtendedResource=false")
	if code != 2 || !strings.Contains(errOut, "--feature-gates") || !strings.Contains(errOut, "locked") {
		t.Errorf("locked gate: exit %d, stderr %q; want 2 saying the gate is locked", code, errOut)
	}
	code, _, errOut = draxr(t, "simulate", "--feature-gates=DRANodeAllocatableResources=true")
	if code != 2 || !strings.Contains(errOut, "DRANodeAllocatableResources=true is not modelled") {
		t.Errorf("node-allocatable gate: exit %d, stderr %q; want 2 saying it is not modelled", code, errOut)
	}
	code, _, errOut = draxr(t, "simulate", "--feature-gates=NoSuchGate=true")
	if code != 2 || !strings.Contains(errOut, "--feature-gates") || !strings.Contains(errOut, "NoSuchGate") {
		t.Errorf("unknown gate: exit %d, stderr %q; want 2 naming the gate", code, errOut)
	}
}

// gpuGroupMax4Doc is a node group of 8-GPU nodes, at most 4.
const gpuGroupMax4Doc = `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: gpu}
spec:
  minSize: 0
  maxSize: 4
  template:
    status: {capacity: {cpu: "32", memory: 128Gi, pods: "110"}}
  resourceSlices:
  - driver: gpu.example.com
    devices: [{name: g0}, {name: g1}, {name: g2}, {name: g3}, {name: g4}, {name: g5}, {name: g6}, {name: g7}]
`

// gangDump is a group of at most 4 nodes of 8 GPUs and a gang of n
// one-GPU pods of minCount n (the 1.37 Workload API's PodGroup, the shape
// that crashed the planner with GenericWorkload on before gangs were
// planned).
func gangDump(n int) string {
	var b strings.Builder
	b.WriteString(gpuClassDoc + "---\n" + gpuGroupMax4Doc + `---
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: train, namespace: ml}
spec:
  podGroupTemplates: [{name: workers, schedulingPolicy: {gang: {minCount: 2}}}]
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
`)
	fmt.Fprintf(&b, "  schedulingPolicy: {gang: {minCount: %d}}\n", n)
	writeTrainPods(&b, n)
	return b.String()
}

// writeTrainPods writes n one-GPU pods train-<i> of PodGroup ml/train.
func writeTrainPods(b *strings.Builder, n int) {
	for i := range n {
		fmt.Fprintf(b, `---
apiVersion: v1
kind: Pod
metadata: {name: train-%d, namespace: ml}
spec:
  schedulingGroup: {podGroupName: train}
  containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
`, i)
	}
}

// With GenericWorkload on a gang is planned all or nothing: 16 pods get 2
// nodes in one atomic step, 40 get none (one node over max) and each says
// why; with the gate off the scheduler ignores the PodGroup and so does
// the plan (4 nodes for 32 of the 40). The rest of the Workload family is
// refused with its reason, alone and together; nothing crashes.
func TestWorkloadGates(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, false)
	plan := func(n int, gates ...string) report.SimulateOutput {
		t.Helper()
		args := []string{"simulate", "-o", "json", "-f", writeFile(t, "gang.yaml", gangDump(n))}
		if len(gates) > 0 {
			args = append(args, "--feature-gates="+strings.Join(gates, ","))
		}
		code, out, errOut := draxr(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", gates, code, errOut)
		}
		var o report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	nodes := func(o report.SimulateOutput) (n int) {
		for _, su := range o.ScaleUps {
			n += su.NewNodes
		}
		return n
	}
	if o := plan(40); nodes(o) != 4 {
		t.Errorf("gate off: %d new nodes, want 4 (pod by pod)", nodes(o))
	}
	o := plan(40, "GenericWorkload=true")
	if nodes(o) != 0 || len(o.NoScaleUp) != 40 {
		t.Fatalf("gang of 40: %d new nodes, %d pods without, want 0 and 40", nodes(o), len(o.NoScaleUp))
	}
	for _, n := range o.NoScaleUp {
		if n.Code != "GangDoesNotFit" || !strings.Contains(n.Reason, "PodGroup ml/train is a gang of minCount 40") ||
			!strings.Contains(n.Reason, "max size 4 leaves room for 4") {
			t.Fatalf("pod %s: %s %q, want GangDoesNotFit naming the gang and the max size", n.Pod, n.Code, n.Reason)
		}
	}
	o = plan(16, "GenericWorkload=true")
	if nodes(o) != 2 || len(o.NoScaleUp) != 0 || len(o.ScaleUps) != 1 || !o.ScaleUps[0].Atomic || o.ScaleUps[0].Gang != "PodGroup ml/train" {
		t.Errorf("gang of 16: scale-ups %+v, want one atomic step of 2 nodes for PodGroup ml/train", o.ScaleUps)
	}

	code, out, errOut := draxr(t, "simulate", "-f", writeFile(t, "gang.yaml", gangDump(16)), "--feature-gates=GenericWorkload=true")
	if code != 0 || !strings.Contains(out, "16 (gang PodGroup ml/train, asked all at once)") {
		t.Errorf("table: exit %d (%s), want the gang's step named:\n%s", code, errOut, out)
	}

	input := writeFile(t, "gang.yaml", gangDump(2))
	all := []string{"GenericWorkload=true", "DRAWorkloadResourceClaims=true"}
	for _, gate := range []string{"CompositePodGroup",
		"PodGroupPreemptionPolicy", "WorkloadWithJob"} {
		all = append(all, gate+"=true")
		code, _, errOut := draxr(t, "simulate", "-f", input, "--feature-gates=GenericWorkload=true,"+gate+"=true")
		if code != 2 || !strings.Contains(errOut, gate+"=true is not modelled") {
			t.Errorf("%s: exit %d, stderr %q; want 2 saying it is not modelled", gate, code, errOut)
		}
	}
	code, _, errOut = draxr(t, "simulate", "-f", input, "--feature-gates="+strings.Join(all, ","))
	if code != 2 || !strings.Contains(errOut, "is not modelled") {
		t.Errorf("all together: exit %d, stderr %q; want 2", code, errOut)
	}
}

// volcanoDump is gangDump's gang as Volcano runs it: its own PodGroup
// (minMember) and scheduler, pods naming the group in an annotation.
func volcanoDump(n int) string {
	var b strings.Builder
	b.WriteString(strings.SplitN(gangDump(0), "---\napiVersion: scheduling.k8s.io/v1beta1", 2)[0])
	fmt.Fprintf(&b, `---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec: {minMember: %d, queue: default}
`, n)
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: train-%d, namespace: ml, annotations: {scheduling.k8s.io/group-name: train}}
spec:
  schedulerName: volcano
  containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
`, i)
	}
	return b.String()
}

// Volcano's gangs are planned all or nothing when its scheduler is
// bypassed (CA's --bypassed-scheduler-names=volcano); otherwise its pods
// are Volcano's to place and get no node.
func TestVolcanoGangs(t *testing.T) {
	plan := func(n int, args ...string) report.SimulateOutput {
		t.Helper()
		code, out, errOut := draxr(t, append([]string{"simulate", "-o", "json", "-f", writeFile(t, "volcano.yaml", volcanoDump(n))}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var o report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := plan(40, "--bypassed-scheduler-names=volcano")
	if len(o.ScaleUps) != 0 || len(o.NoScaleUp) != 40 {
		t.Fatalf("gang of 40: %+v, want no scale-up and 40 pods refused", o.ScaleUps)
	}
	for _, n := range o.NoScaleUp {
		if n.Code != "GangDoesNotFit" || !strings.Contains(n.Reason, "PodGroup.scheduling.volcano.sh ml/train is a gang of minCount 40") {
			t.Fatalf("pod %s: %s %q, want GangDoesNotFit naming the Volcano group", n.Pod, n.Code, n.Reason)
		}
	}
	o = plan(16, "--bypassed-scheduler-names=volcano")
	if len(o.ScaleUps) != 1 || o.ScaleUps[0].NewNodes != 2 || !o.ScaleUps[0].Atomic {
		t.Errorf("gang of 16: %+v, want one atomic step of 2 nodes", o.ScaleUps)
	}
	o = plan(16)
	if len(o.ScaleUps) != 0 || len(o.NoScaleUp) != 16 || o.NoScaleUp[0].Code != "NotServedByScheduler" {
		t.Errorf("not bypassed: %+v / %+v, want every pod NotServedByScheduler", o.ScaleUps, o.NoScaleUp)
	}
}

// A plan over slices whose devices carry nodeAllocatableResources says
// once that it does not count what they take of their nodes.
func TestNodeAllocatableWarnedOnce(t *testing.T) {
	slice := `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %s}
spec:
  driver: cpu.example.com
  nodeName: gpu-0
  pool: {name: %s, resourceSliceCount: 1}
  devices: [{name: numa-0, nodeAllocatableResources: {cpu: {mapping: {deviceMultiplier: "8"}}}}]
`
	dump := strings.SplitN(localDump(0), "\n---\napiVersion: v1\nkind: Pod\n", 2)[0] + "\n" + fmt.Sprintf(slice, "a", "a") + fmt.Sprintf(slice, "b", "b")
	code, out, errOut := draxr(t, "simulate", "-f", writeFile(t, "dump.yaml", dump))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "carry nodeAllocatableResources"); n != 1 || !strings.Contains(out, "warning: 2 ResourceSlices carry nodeAllocatableResources") {
		t.Errorf("%d warnings, want one naming 2 slices:\n%s", n, out)
	}
}

// groupClaimDump is gangDump(n) whose pods also share a PodGroup claim
// (spec.resourceClaims of the group and of each pod, from one template):
// one fabric channel, of which the cluster has one, in a slice for all
// nodes.
func groupClaimDump(n int) string {
	var b strings.Builder
	b.WriteString(gpuClassDoc + `---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: channel.example.com}
spec:
  selectors: [{cel: {expression: device.driver == "channel.example.com"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fabric}
spec:
  driver: channel.example.com
  allNodes: true
  pool: {name: fabric, generation: 1, resourceSliceCount: 1}
  devices: [{name: channel-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: channel, namespace: ml}
spec:
  spec:
    devices:
      requests: [{name: channel, exactly: {deviceClassName: channel.example.com}}]
---
` + gpuGroupMax4Doc + `---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml, uid: 6f1c1a52-0000-4000-8000-000000000001}
spec:
  resourceClaims: [{name: channel, resourceClaimTemplateName: channel}]
`)
	fmt.Fprintf(&b, "  schedulingPolicy: {gang: {minCount: %d}}\n", n)
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: train-%d, namespace: ml}
spec:
  schedulingGroup: {podGroupName: train}
  resourceClaims: [{name: channel, resourceClaimTemplateName: channel}]
  containers:
  - name: c
    image: busybox
    resources:
      limits: {example.com/gpu: "1"}
      claims: [{name: channel}]
`, i)
	}
	return b.String()
}

// With DRAWorkloadResourceClaims a claim the PodGroup holds is made once
// for the group and shared by its pods, as the resourceclaim controller
// and the scheduler do: 16 pods sharing the cluster's one fabric channel
// get 2 nodes in one step. Without the gate each pod gets a claim of its
// own, the channel serves one of them, and the gang gets no node.
func TestPodGroupClaims(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, false)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAWorkloadResourceClaims, false)
	input := writeFile(t, "gang.yaml", groupClaimDump(16))
	plan := func(gates string) report.SimulateOutput {
		t.Helper()
		code, out, errOut := draxr(t, "simulate", "-o", "json", "-f", input, "--feature-gates="+gates)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", gates, code, errOut)
		}
		var o report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// Alone (the process's gates are the defaults yet), the gate is refused by its dependency, with the reason.
	if code, _, errOut := draxr(t, "simulate", "-f", input, "--feature-gates=DRAWorkloadResourceClaims=true"); code != 2 ||
		!strings.Contains(errOut, "depends on features that are disabled: [GenericWorkload]") {
		t.Errorf("DRAWorkloadResourceClaims alone: exit %d, stderr %q; want 2 naming GenericWorkload", code, errOut)
	}
	o := plan("GenericWorkload=true,DRAWorkloadResourceClaims=true")
	if len(o.ScaleUps) != 1 || o.ScaleUps[0].NewNodes != 2 || !o.ScaleUps[0].Atomic || len(o.NoScaleUp) != 0 {
		t.Fatalf("group claim: scale-ups %+v, without %+v; want one atomic step of 2 nodes and every pod placed", o.ScaleUps, o.NoScaleUp)
	}
	o = plan("GenericWorkload=true,DRAWorkloadResourceClaims=false")
	if len(o.ScaleUps) != 0 || len(o.NoScaleUp) != 16 {
		t.Fatalf("claims per pod: scale-ups %+v, %d pods without; want none and 16", o.ScaleUps, len(o.NoScaleUp))
	}
	for _, n := range o.NoScaleUp {
		if n.Code != "GangDoesNotFit" {
			t.Fatalf("pod %s: %s %q, want GangDoesNotFit", n.Pod, n.Code, n.Reason)
		}
	}
}
