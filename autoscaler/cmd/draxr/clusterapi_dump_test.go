package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/scaleup"
)

// capiDump is a Cluster API cluster as `kubectl get -A -o yaml` shows it:
// a MachineDeployment "gpu" (min 1, max 3, 2 replicas) without capacity
// annotations, its MachineSet, two Machines with providerIDs, their two
// Ready nodes publishing 8 GPUs each, the infrastructure template, the
// Cluster, a Service and a Secret, and the pending pods.
func capiDump(pods int, mdAnnotations string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: v1
kind: List
items:
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: Cluster
  metadata: {name: prod, namespace: default}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: MachineDeployment
  metadata:
    name: gpu
    namespace: default
    annotations:
      cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
      cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "3"
` + mdAnnotations + `  spec:
    clusterName: prod
    replicas: 2
    template:
      spec:
        clusterName: prod
        infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: gpu}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: MachineSet
  metadata:
    name: gpu-7d9f
    namespace: default
    ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta2, kind: MachineDeployment, name: gpu, uid: md-uid}]
  spec: {clusterName: prod, replicas: 2}
- apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
  kind: DockerMachineTemplate
  metadata: {name: gpu, namespace: default}
  spec: {template: {spec: {}}}
- apiVersion: v1
  kind: Service
  metadata: {name: kubernetes, namespace: default}
  spec: {ports: [{port: 443}]}
- apiVersion: v1
  kind: Secret
  metadata: {name: prod-kubeconfig, namespace: default}
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu.example.com}
  spec:
    extendedResourceName: example.com/gpu
    selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
`)
	for i := range 2 {
		fmt.Fprintf(&b, `- apiVersion: cluster.x-k8s.io/v1beta2
  kind: Machine
  metadata:
    name: gpu-7d9f-m%[1]d
    namespace: default
    ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta2, kind: MachineSet, name: gpu-7d9f, uid: ms-uid}]
  spec: {clusterName: prod, providerID: "docker:////prod-gpu-%[1]d"}
  status: {phase: Running, nodeRef: {name: prod-gpu-%[1]d}}
- apiVersion: v1
  kind: Node
  metadata:
    name: prod-gpu-%[1]d
    labels: {kubernetes.io/hostname: prod-gpu-%[1]d}
  spec: {providerID: "docker:////prod-gpu-%[1]d"}
  status:
    capacity: {cpu: "32", memory: 128Gi, pods: "110"}
    allocatable: {cpu: "32", memory: 128Gi, pods: "110"}
    conditions: [{type: Ready, status: "True", lastTransitionTime: "2026-01-01T00:00:00Z"}]
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: prod-gpu-%[1]d-gpu}
  spec:
    driver: gpu.example.com
    nodeName: prod-gpu-%[1]d
    pool: {name: prod-gpu-%[1]d, resourceSliceCount: 1}
    devices: [{name: g0}, {name: g1}, {name: g2}, {name: g3}, {name: g4}, {name: g5}, {name: g6}, {name: g7}]
`, i)
	}
	for i := range pods {
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Pod
  metadata: {name: train-%02d, namespace: ml}
  spec:
    containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
  status:
    phase: Pending
    conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
`, i)
	}
	return b.String()
}

// The dump is planned as the clusterapi provider would plan the cluster:
// the two members (by providerID) count, the template is copied from a
// member (no capacity annotations needed), the group grows by 1 to its
// max of 3 and 6 pods get MaxSizeReached; the new node has a node's name.
func TestSimulateClusterAPIDumpAsTheProviderSeesIt(t *testing.T) {
	code, out, errOut := draxr(t, "simulate", "-f", writeFile(t, "dump.yaml", capiDump(30, "")), "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	if !strings.Contains(errOut, "skipped 3 objects of kinds draxr does not read: cluster.x-k8s.io/v1beta2 Cluster, v1 Secret, v1 Service") {
		t.Errorf("stderr lacks the skipped kinds:\n%s", errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "MachineDeployment/default/gpu" || plan.ScaleUps[0].NewNodes != 1 {
		t.Fatalf("scale-ups = %+v, want MachineDeployment/default/gpu +1 (2 members, max 3)", plan.ScaleUps)
	}
	for _, g := range plan.Groups {
		if g.Name == "MachineDeployment/default/gpu" && g.CurrentNodes != 2 {
			t.Errorf("group gpu: current %d, want its 2 members", g.CurrentNodes)
		}
	}
	maxed := 0
	for _, n := range plan.NoScaleUp {
		for _, gr := range n.NodeGroups {
			if gr.Code == scaleup.MaxSizeReached {
				maxed++
			}
		}
	}
	if len(plan.NoScaleUp) != 6 || maxed != 6 {
		t.Errorf("%d pods without a scale-up (%d MaxSizeReached), want 6 and 6", len(plan.NoScaleUp), maxed)
	}
	for _, p := range plan.ScaleUps[0].Placements {
		if errs := validation.IsDNS1123Subdomain(p.Node); len(errs) > 0 || !strings.HasPrefix(p.Node, "gpu-new-") {
			t.Errorf("planned node %q: want a node name gpu-new-<n> (%v)", p.Node, errs)
		}
	}
}

// A group at zero whose template slices are in a ConfigMap of the dump
// (a real MIG template is over the annotation size limit) is planned
// from it.
func TestSimulateClusterAPIConfigMapTemplate(t *testing.T) {
	dump := strings.Replace(capiDump(20, `      capacity.cluster-autoscaler.kubernetes.io/cpu: "32"
      capacity.cluster-autoscaler.kubernetes.io/memory: 128Gi
      draxr.dev/template-resource-slices-configmap: gpu-template
`), `min-size: "1"`, `min-size: "0"`, 1)
	dump = strings.ReplaceAll(dump, "replicas: 2", "replicas: 0")
	// No Machines, no nodes: the group is at zero.
	var kept []string
	skip := false
	for _, item := range strings.SplitAfter(dump, "\n- ") {
		if strings.HasPrefix(item, "apiVersion: cluster.x-k8s.io/v1beta2\n  kind: Machine\n") ||
			strings.HasPrefix(item, "apiVersion: v1\n  kind: Node\n") ||
			strings.HasPrefix(item, "apiVersion: resource.k8s.io/v1\n  kind: ResourceSlice\n") {
			skip = true
		}
		if !skip {
			kept = append(kept, item)
		} else {
			kept = append(kept, "apiVersion: v1\n  kind: Namespace\n  metadata: {name: ns-"+fmt.Sprint(len(kept))+"}\n- ")
		}
		skip = false
	}
	dump = strings.TrimSuffix(strings.Join(kept, ""), "- ") + `- apiVersion: v1
  kind: ConfigMap
  metadata: {name: gpu-template, namespace: default}
  data:
    resourceSlices: |
      - driver: gpu.example.com
        devices: [{name: g0}, {name: g1}, {name: g2}, {name: g3}, {name: g4}, {name: g5}, {name: g6}, {name: g7}]
`
	plan := simulatePlan(t, "-f", writeFile(t, "dump.yaml", dump))
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 3 || len(plan.ScaleUps[0].Pods) != 20 {
		t.Fatalf("scale-ups = %+v, want +3 nodes for 20 one-GPU pods on 8-GPU nodes", plan.ScaleUps)
	}

	// Without the ConfigMap the group cannot be read: exit 2 naming it.
	noCM := dump[:strings.Index(dump, "- apiVersion: v1\n  kind: ConfigMap")]
	code, _, errOut := draxr(t, "simulate", "-f", writeFile(t, "nocm.yaml", noCM))
	if code != 2 || !strings.Contains(errOut, "MachineDeployment/default/gpu is not a node group") || !strings.Contains(errOut, "gpu-template") {
		t.Errorf("exit %d, stderr %s; want 2 naming the group and its ConfigMap", code, errOut)
	}
}

// `draxr simulate --scale-down` says why each node of an autoscaled group
// stays, with the autoscaler's own scale-down: of two idle members of a
// group of min 1, one is unneeded (and waits --scale-down-unneeded-time),
// the other is kept by the min size.
func TestSimulateScaleDownVerdicts(t *testing.T) {
	path := writeFile(t, "dump.yaml", capiDump(0, ""))
	for _, tc := range []struct {
		unneededTime string
		want         string
	}{
		{"10m", string(scaledown.Unneeded) + "/" + string(scaledown.NotUnneededLongEnough)},
		{"0s", string(scaledown.Removable) + "/"},
	} {
		plan := simulatePlan(t, "-f", path, "--scale-down", "--scale-down-unneeded-time", tc.unneededTime)
		var got []string
		for _, v := range plan.ScaleDown {
			if v.NodeGroup != "MachineDeployment/default/gpu" || v.Reason == "" {
				t.Errorf("verdict %+v: want the group's and a reason", v)
			}
			got = append(got, string(v.Verdict)+"/"+string(v.Code))
		}
		slices.Sort(got)
		want := []string{string(scaledown.Kept) + "/" + string(scaledown.NodeGroupMinSizeReached), tc.want}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("--scale-down-unneeded-time %s: verdicts %v, want %v", tc.unneededTime, got, want)
		}
	}
	// The table says it too.
	code, out, _ := draxr(t, "simulate", "-f", path, "--scale-down")
	if code != 0 || !strings.Contains(out, "SCALE-DOWN") || !strings.Contains(out, "NodeGroupMinSizeReached: underutilized, but node group MachineDeployment/default/gpu is at its min size 1") {
		t.Errorf("exit %d, table:\n%s", code, out)
	}
}

// A capacity annotation is read as its resource: cpu "8Gi" (memory's
// unit) is refused as bad input naming the object and the annotation,
// not planned as a node of 8.6 billion cores.
func TestCapacityAnnotationInTheWrongUnit(t *testing.T) {
	dump := writeFile(t, "dump.yaml", capiDump(0, `      capacity.cluster-autoscaler.kubernetes.io/cpu: "8Gi"
      capacity.cluster-autoscaler.kubernetes.io/memory: "64Gi"
`))
	for _, cmd := range []string{"simulate", "capacity", "doctor"} {
		code, out, errOut := draxr(t, cmd, "-f", dump)
		want := `MachineDeployment default/gpu: annotation capacity.cluster-autoscaler.kubernetes.io/cpu: "8Gi" is not a number of cores`
		if code != 2 || !strings.Contains(errOut, want) || out != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 2 and %q", cmd, code, errOut, out, want)
		}
	}
}
