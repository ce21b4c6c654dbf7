package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/report"
)

// draxr runs the CLI in-process and returns its exit code and output.
func draxr(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSimulateBuiltinTable(t *testing.T) {
	code, out, errOut := draxr(t, "simulate")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	for _, want := range []string{
		"NODE GROUPS\n", "\nSCALE-UP\n", "\nPLACEMENTS\n", "\nNO SCALE-UP\n",
		"example.com/gpu: 8 (DRA, DeviceClass gpu.example.com)",
		"example.com/gpu: 4 (device plugin)",
		"deviceclass.resource.kubernetes.io/gpu.example.com: 8 (DRA, DeviceClass gpu.example.com)",
		"needs 9 example.com/gpu; a gpu-dra node offers 8",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if errOut != "planning the built-in example (no -f, no cluster)\n" {
		t.Errorf("stderr = %q, want only the built-in example's banner", errOut)
	}
}

func TestSimulateBuiltinJSON(t *testing.T) {
	code, out, errOut := draxr(t, "simulate", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"scaleUp", "existingNodes", "noScaleUp", "nodeGroups"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON lacks key %q; has %v", k, keys)
		}
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	// The built-in example's giant-model asks for 9 GPUs; no node has 9.
	if len(plan.NoScaleUp) != 1 || plan.NoScaleUp[0].Pod.String() != "ml/giant-model" {
		t.Errorf("noScaleUp = %+v, want only ml/giant-model", plan.NoScaleUp)
	}

	code, out, errOut = draxr(t, "simulate", "-o", "yaml")
	if code != 0 {
		t.Fatalf("-o yaml: exit %d, stderr: %s", code, errOut)
	}
	var fromYAML map[string]any
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil || fromYAML["scaleUp"] == nil {
		t.Errorf("-o yaml: %v, keys %v", err, fromYAML)
	}
}

func TestCapacityBuiltin(t *testing.T) {
	code, out, errOut := draxr(t, "capacity", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	var r capacity.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// gpu-dra-0 publishes 8 devices; finetune-0's extended-resource claim
	// holds 6 of them. Nothing is planned by `capacity`.
	type counts struct{ total, allocated, free int64 }
	want := counts{8, 6, 2}
	var class *capacity.Row
	for i := range r.Classes {
		if r.Classes[i].Name == "gpu.example.com" {
			class = &r.Classes[i]
		}
	}
	if class == nil || len(r.Classes) != 1 {
		t.Fatalf("device classes = %+v, want only gpu.example.com", r.Classes)
	}
	if got := (counts{class.Total, class.Allocated, class.Free}); got != want {
		t.Errorf("gpu.example.com: %+v, want %+v", got, want)
	}
	if len(class.Groups) != 1 || class.Groups[0] != (capacity.Part{Name: "gpu-dra", Total: 8, Allocated: 6, Free: 2}) {
		t.Errorf("gpu.example.com by node group = %+v, want gpu-dra 8/6/2", class.Groups)
	}
	names := map[string]counts{}
	for _, row := range r.Resources {
		names[row.Name+" "+string(row.Source)] = counts{row.Total, row.Allocated, row.Free}
	}
	for _, name := range []string{"example.com/gpu DRA", "deviceclass.resource.kubernetes.io/gpu.example.com DRA"} {
		if got, ok := names[name]; !ok || got != want {
			t.Errorf("%s: %+v (found %v), want %+v; rows %v", name, got, ok, want, names)
		}
	}

	code, out, _ = draxr(t, "capacity")
	if code != 0 {
		t.Fatalf("table: exit %d", code)
	}
	if !regexp.MustCompile(`(?m)^gpu\.example\.com\s+8\s+6\s+2\s+0\s+gpu-dra 2/8 free$`).MatchString(out) {
		t.Errorf("capacity table lacks the gpu.example.com row 8/6/2:\n%s", out)
	}
}

func TestBadInputFiles(t *testing.T) {
	tests := []struct {
		name, file, content, wantErr string
	}{
		{"malformed YAML", "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n", "malformed YAML"},
		{"unknown kind", "gadget.yaml", "apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n", `unsupported kind "Gadget"`},
		{"NodeGroup min > max", "groups.yaml", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: gpu}
spec: {minSize: 3, maxSize: 1, template: {status: {capacity: {cpu: "8"}}}}
`, "spec.maxSize"},
		// Mistakes in the shapes the fidelity scenarios use, as a user
		// writing them by hand would make them.
		{"device taint effect", "groups.yaml", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: gpu}
spec:
  minSize: 0
  maxSize: 3
  template: {status: {capacity: {cpu: "8", memory: 8Gi, pods: "110"}}}
  resourceSlices:
  - driver: gpu.example.com
    devices:
    - name: gpu-0
      taints: [{key: example.com/ecc, effect: Sometimes}]
`, `NodeGroup gpu: spec.resourceSlices[0].devices[0].taints[0].effect: Unsupported value: "Sometimes"`},
		{"exactly and firstAvailable", "template.yaml", `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
        firstAvailable: [{name: a100, deviceClassName: gpu.example.com}]
`, "ResourceClaimTemplate ml/gpu: spec.spec.devices.requests[0]"},
		{"DaemonSet without selector", "agent.yaml", `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: registry.example/agent:1, resources: {requests: {cpu: "1"}}}]
`, "DaemonSet kube-system/agent: spec.template.metadata.labels"},
		{"zero maxSkew", "pod.yaml", `apiVersion: v1
kind: Pod
metadata: {name: shard-0, namespace: search}
spec:
  topologySpreadConstraints:
  - {maxSkew: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  containers: [{name: shard, image: registry.example/shard:9}]
`, "Pod search/shard-0: spec.topologySpreadConstraints[0].maxSkew"},
	}
	for _, tt := range tests {
		path := writeFile(t, tt.file, tt.content)
		for _, cmd := range []string{"simulate", "capacity"} {
			t.Run(tt.name+"/"+cmd, func(t *testing.T) {
				code, out, errOut := draxr(t, cmd, "-f", path)
				if code != 2 {
					t.Errorf("exit %d, want 2; stderr: %s", code, errOut)
				}
				if !strings.Contains(errOut, path) || !strings.Contains(errOut, tt.wantErr) {
					t.Errorf("stderr = %q, want the file %s and %q", errOut, path, tt.wantErr)
				}
				if out != "" {
					t.Errorf("stdout = %q, want nothing", out)
				}
			})
		}
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.yaml")
		if code, _, errOut := draxr(t, "simulate", "-f", path); code != 2 || !strings.Contains(errOut, path) {
			t.Errorf("exit %d, stderr %q; want 2 naming %s", code, errOut, path)
		}
	})
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"simulate", "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"capacity", "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"simulate", "--expander", "cheapest"}, `unknown expander "cheapest"`},
		{[]string{"simulate", "--expander", "priority"}, "--expander-priorities"},
		{[]string{"simulate", "--max-nodes-total", "-1"}, "--max-nodes-total"},
		{[]string{"simulate", "--no-such-flag"}, "unknown flag"},
		{[]string{"simulate", "extra-arg"}, `unknown command "extra-arg" for "draxr simulate"`},
		{[]string{"capacity", "extra-arg"}, `unknown command "extra-arg" for "draxr capacity"`},
		{[]string{"doctor", "-f", "x.yaml", "extra-arg"}, `unknown command "extra-arg" for "draxr doctor"`},
		{[]string{"extra-arg"}, `unknown command "extra-arg" for "draxr"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errOut := draxr(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, errOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
			}
		})
	}
}

const scenarios = "../../../simulator/offline/testdata/scenarios"

// A DeviceClass whose selector does not compile is reported, not fatal.
func TestBrokenCELClassExitsZero(t *testing.T) {
	code, out, errOut := draxr(t, "simulate", "-f", filepath.Join(scenarios, "broken-cel-device-class", "input"))
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr: %s", code, errOut)
	}
	for _, want := range []string{"warning: DeviceClass fpga.example.com", "hw/fpga-job", "cannot be placed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The offline package's golden files are what `draxr simulate -o json`
// prints for each scenario with its options as flags.
func TestScenarioGoldensMatchCLI(t *testing.T) {
	dirs, err := os.ReadDir(scenarios)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		dir := filepath.Join(scenarios, d.Name())
		golden, err := os.ReadFile(filepath.Join(dir, "golden.json"))
		if err != nil {
			continue // a scenario skipped as a known issue has no golden file
		}
		t.Run(d.Name(), func(t *testing.T) {
			args := append([]string{"simulate", "-o", "json", "-f", filepath.Join(dir, "input")}, optionFlags(t, dir)...)
			code, out, errOut := draxr(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if out != string(golden) {
				t.Errorf("draxr %s differs from %s/golden.json", strings.Join(args, " "), dir)
			}
		})
	}
}

// optionFlags turns a scenario's options.yaml into CLI flags.
func optionFlags(t *testing.T, dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, "options.yaml"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Expander           string              `json:"expander"`
		ExpanderPriorities map[string][]string `json:"expanderPriorities"`
		MaxNodesTotal      int                 `json:"maxNodesTotal"`
	}
	if err := yaml.UnmarshalStrict(data, &o); err != nil {
		t.Fatal(err)
	}
	var flags []string
	if o.Expander != "" {
		flags = append(flags, "--expander", o.Expander)
	}
	if o.ExpanderPriorities != nil {
		b, err := yaml.Marshal(o.ExpanderPriorities)
		if err != nil {
			t.Fatal(err)
		}
		flags = append(flags, "--expander-priorities", writeFile(t, "priorities.yaml", string(b)))
	}
	if o.MaxNodesTotal != 0 {
		flags = append(flags, "--max-nodes-total", strconv.Itoa(o.MaxNodesTotal))
	}
	return flags
}

// simulate takes CA's --expendable-pods-priority-cutoff and
// --bypassed-scheduler-names with CA's meaning and defaults.
func TestSimulatePodFlags(t *testing.T) {
	extra := writeFile(t, "pods.yaml", `apiVersion: v1
kind: Pod
metadata: {name: low, namespace: batch, uid: 7d3e0000-0000-4000-8000-000000000001}
spec:
  priority: -20
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: batch, uid: 7d3e0000-0000-4000-8000-000000000002}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`)
	codes := func(args ...string) map[string]string {
		t.Helper()
		code, out, errOut := draxr(t, append([]string{"simulate", "-o", "json", "-f", "../../../simulator/examples/builtin.yaml", "-f", extra}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr: %s", args, code, errOut)
		}
		var plan report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, n := range plan.NoScaleUp {
			got[n.Pod.String()] = string(n.Code)
		}
		return got
	}
	got := codes()
	if got["batch/low"] != "Expendable" || got["batch/other"] != "NotServedByScheduler" {
		t.Errorf("defaults: noScaleUp codes %v, want batch/low Expendable (-20 < -10), batch/other NotServedByScheduler", got)
	}
	got = codes("--expendable-pods-priority-cutoff=-100", "--bypassed-scheduler-names=volcano")
	if _, ok := got["batch/low"]; ok {
		t.Errorf("cutoff -100: batch/low still left out (%v)", got)
	}
	if _, ok := got["batch/other"]; ok {
		t.Errorf("volcano bypassed: batch/other still left out (%v)", got)
	}
}
