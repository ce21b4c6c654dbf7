package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/report"
)

// rackGroupDoc is a NodeGroup of 8-GPU nodes whose template is in rack
// (none when rack is "").
func rackGroupDoc(name, rack string, maxSize int) string {
	labels := ""
	if rack != "" {
		labels = fmt.Sprintf("    metadata: {labels: {example.com/rack: %s}}\n", rack)
	}
	return fmt.Sprintf(`apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: %s}
spec:
  minSize: 0
  maxSize: %d
  template:
%s    status: {capacity: {cpu: "32", memory: 128Gi, pods: "110"}}
  resourceSlices:
  - driver: gpu.example.com
    devices: [{name: g0}, {name: g1}, {name: g2}, {name: g3}, {name: g4}, {name: g5}, {name: g6}, {name: g7}]
`, name, maxSize, labels)
}

// rackGangDump is a gang of n one-GPU pods whose PodGroup requires one
// domain of example.com/rack, beside rack a (room for one node), rack b
// (four) and a group of no known rack (ten).
func rackGangDump(n int) string {
	var b strings.Builder
	for _, doc := range []string{gpuClassDoc, rackGroupDoc("rack-a", "a", 1), rackGroupDoc("rack-b", "b", 4), rackGroupDoc("anywhere", "", 10)} {
		b.WriteString(doc + "---\n")
	}
	fmt.Fprintf(&b, `apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: %d}}
  schedulingConstraints: {topology: [{key: example.com/rack}]}
`, n)
	writeTrainPods(&b, n)
	return b.String()
}

// With TopologyAwareWorkloadScheduling a rack gang gets its nodes in one
// rack, and the plan says which, in JSON and in the table; a gang no rack
// holds gets no node, and each pod names the key and every rack's bound.
func TestTopologyGangPlan(t *testing.T) {
	gates := "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
	input := writeFile(t, "rack.yaml", rackGangDump(16))
	code, out, errOut := draxr(t, "simulate", "-o", "json", "-f", input, gates)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var o report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.ScaleUps) != 1 || o.ScaleUps[0].NodeGroup != "rack-b" || o.ScaleUps[0].NewNodes != 2 ||
		o.ScaleUps[0].Topology == nil || o.ScaleUps[0].Topology.Key != "example.com/rack" || o.ScaleUps[0].Topology.Value != "b" {
		t.Fatalf("scale-ups %s, want rack-b +2 in example.com/rack=b", out)
	}
	if !strings.Contains(out, `"topology": {`) && !strings.Contains(out, `"topology":{`) {
		t.Errorf("JSON has no scaleUp[].topology:\n%s", out)
	}
	code, out, errOut = draxr(t, "simulate", "-f", input, gates)
	if code != 0 || !strings.Contains(out, "16 (gang PodGroup ml/train in example.com/rack=b, asked all at once)") {
		t.Errorf("table: exit %d (%s), want the gang's domain named:\n%s", code, errOut, out)
	}

	code, out, errOut = draxr(t, "simulate", "-o", "json", "-f", writeFile(t, "big.yaml", rackGangDump(40)), gates)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	o = report.SimulateOutput{}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.ScaleUps) != 0 || len(o.NoScaleUp) != 40 {
		t.Fatalf("scale-ups %+v, %d refused; want none and 40", o.ScaleUps, len(o.NoScaleUp))
	}
	for _, n := range o.NoScaleUp {
		for _, want := range []string{"one domain of example.com/rack", "example.com/rack=a: 0 fit its 0 existing nodes, node group rack-a: all 40 pods need 5 new nodes; max size 1",
			"example.com/rack=b: 0 fit its 0 existing nodes, node group rack-b: all 40 pods need 5 new nodes; max size 4",
			"node group anywhere: its template has no label example.com/rack"} {
			if n.Code != "TopologyDomainNotFound" || !strings.Contains(n.Reason, want) {
				t.Fatalf("pod %s: %s %q, want TopologyDomainNotFound with %q", n.Pod, n.Code, n.Reason, want)
			}
		}
	}
}

// A Kueue TAS request (its PodTemplate requires one rack) is decided in
// one rack alike by draxr simulate and by the loop: the same condition,
// the same scale-up and provisioningClassDetails naming the rack.
func TestTopologyRequestSimulateIsTheLoop(t *testing.T) {
	var b strings.Builder
	for _, doc := range []string{gpuClassDoc, rackGroupDoc("rack-a", "a", 1), rackGroupDoc("rack-b", "b", 4)} {
		b.WriteString(doc + "---\n")
	}
	b.WriteString(`apiVersion: v1
kind: PodTemplate
metadata: {name: workers, namespace: ml}
template:
  metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: example.com/rack}}
  spec:
    containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train, namespace: ml}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: workers}, count: 16}]
`)
	path := writeFile(t, "tas.yaml", b.String())
	plan := simulatePlan(t, "-f", path)
	if len(plan.ProvisioningRequests) != 1 {
		t.Fatalf("requests %+v, want train", plan.ProvisioningRequests)
	}
	cli := plan.ProvisioningRequests[0]
	if cli.Condition.Reason != provreq.ReasonCapacityIsProvisioned || cli.ProvisioningClassDetails["example.com/rack"] != "b" ||
		len(cli.ScaleUp) != 1 || cli.ScaleUp[0].NodeGroup != "rack-b" || cli.ScaleUp[0].NewNodes != 2 {
		t.Fatalf("simulate: %+v, want CapacityIsProvisioned, rack-b +2, details example.com/rack=b", cli)
	}
	loop := loopRequests(t, path)["train"]
	if loop.Condition != cli.Condition || fmt.Sprint(stripAtomic(loop.ScaleUp)) != fmt.Sprint(cli.ScaleUp) ||
		fmt.Sprint(loop.ProvisioningClassDetails) != fmt.Sprint(cli.ProvisioningClassDetails) {
		t.Errorf("simulate  %+v\nthe loop  %+v", cli, loop)
	}
}
