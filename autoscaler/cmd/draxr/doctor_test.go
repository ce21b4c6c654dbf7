package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/doctor"
	"draxr.dev/draxr/simulator/report"
)

const twoClassesOneName = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu-a100, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {extendedResourceName: example.com/gpu}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu-h100, creationTimestamp: "2026-03-01T00:00:00Z"}
spec: {extendedResourceName: example.com/gpu}
`

const staleClaim = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: gone-gpu
  namespace: ml
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: gone, uid: u1, controller: true}]
spec:
  devices:
    requests:
    - name: container-0-request-0
      exactly: {deviceClassName: gpu-h100, allocationMode: ExactCount, count: 1}
`

func TestDoctor(t *testing.T) {
	planted := writeFile(t, "planted.yaml", twoClassesOneName+"---\n"+staleClaim)
	broken := writeFile(t, "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n")
	brokenClass := writeFile(t, "class.yaml", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: broken}\nspec: {selectors: [{cel: {expression: device.driver == }}]}\n")
	groups := writeFile(t, "groups.yaml", "apiVersion: draxr.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {minSize: 0, maxSize: 1, template: {status: {capacity: {cpu: \"8\"}}}}\n")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// wantLines are regexps each matching one whole output line.
		wantLines []string
		wantErr   string
	}{
		{name: "built-in example is clean", args: []string{"doctor"}, wantCode: 0, wantLines: []string{`No problems found\.`}},
		{name: "golden scenario is clean", args: []string{"doctor", "-f", scenarios + "/explicit-extended-resource-name/input"}, wantCode: 0},
		{
			name: "planted pitfalls: warnings only", args: []string{"doctor", "-f", planted}, wantCode: 0,
			wantLines: []string{
				`SEVERITY\s+CHECK\s+OBJECTS\s+PROBLEM AND FIX`,
				`warning\s+duplicate-extended-resource-name\s+DeviceClass/gpu-a100,DeviceClass/gpu-h100\s+DeviceClasses gpu-a100, gpu-h100 all map extended resource example\.com/gpu; .*gpu-h100 wins: pods asking example\.com/gpu get gpu-h100's devices, pods asking deviceclass\.resource\.kubernetes\.io/gpu-a100 get gpu-a100's devices\. Fix: .*clear it on gpu-a100.*`,
				`warning\s+stale-extended-resource-claim\s+ResourceClaim/ml/gone-gpu\s+.*pod ml/gone, which does not exist.*Fix: delete the claim.*`,
			},
			wantErr: "2 warnings, no errors",
		},
		{
			name: "--strict fails on warnings", args: []string{"doctor", "-f", planted, "--strict"}, wantCode: 1,
			wantErr: "2 problems found (0 errors, 2 warnings)",
		},
		{
			name: "an error exits 1", args: []string{"doctor", "-f", brokenClass}, wantCode: 1,
			wantErr: "1 problems found (1 errors, 0 warnings)",
		},
		{
			name: "-n keeps cluster-wide findings and those of the namespace", args: []string{"doctor", "-f", planted, "-n", "web"}, wantCode: 0,
			wantLines: []string{`SEVERITY.*`, `warning\s+duplicate-extended-resource-name\s+.*`},
			wantErr:   "1 warnings, no errors",
		},
		{name: "malformed file", args: []string{"doctor", "-f", broken}, wantCode: 2, wantErr: "malformed YAML"},
		{name: "bad output format", args: []string{"doctor", "-o", "xml"}, wantCode: 2, wantErr: `unknown output format "xml"`},
		{name: "node groups without a cluster", args: []string{"doctor", "--node-group-config", groups}, wantCode: 2, wantErr: "--node-group-config is for a live cluster"},
		{name: "files and a cluster", args: []string{"doctor", "-f", planted, "--kubeconfig", groups}, wantCode: 2, wantErr: "give one of them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := draxr(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.wantCode, errOut)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if tt.wantLines != nil && len(lines) != len(tt.wantLines) {
				t.Errorf("%d lines, want %d:\n%s", len(lines), len(tt.wantLines), out)
			}
			for i, re := range tt.wantLines {
				if i < len(lines) && !regexp.MustCompile("^"+re+"$").MatchString(lines[i]) {
					t.Errorf("line %d = %q, want /%s/", i, lines[i], re)
				}
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestDoctorJSON(t *testing.T) {
	planted := writeFile(t, "planted.yaml", twoClassesOneName)
	code, out, errOut := draxr(t, "doctor", "-f", planted, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, want 0 (a warning); stderr: %s", code, errOut)
	}
	var got doctorOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Findings) != 1 {
		t.Fatalf("findings = %+v, want one", got.Findings)
	}
	f := got.Findings[0]
	want := []doctor.Object{{Kind: "DeviceClass", Name: "gpu-a100"}, {Kind: "DeviceClass", Name: "gpu-h100"}}
	if f.Check != doctor.CheckDuplicateExtendedName || f.Severity != doctor.Warning || len(f.Objects) != 2 ||
		f.Objects[0] != want[0] || f.Objects[1] != want[1] || f.Advice == "" {
		t.Errorf("finding = %+v, want warning %s naming %v with advice", f, doctor.CheckDuplicateExtendedName, want)
	}

	code, out, _ = draxr(t, "doctor", "-o", "json")
	if code != 0 || !strings.Contains(out, `"findings": []`) {
		t.Errorf("clean: exit %d, output %s; want 0 and an empty findings list", code, out)
	}
}

// kubectl runs `kubectl draxr ARGS...` by finding the longest
// kubectl-draxr[-ARG]... executable on PATH (non-flag args only, joined by
// dashes) and running it with the args that follow.
func kubectlPluginCommand(t *testing.T, path string, args []string) *exec.Cmd {
	t.Helper()
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, strings.ReplaceAll(a, "-", "_"))
	}
	for n := len(words); n > 0; n-- {
		name := "kubectl-" + strings.Join(words[:n], "-")
		for _, dir := range filepath.SplitList(path) {
			candidate := filepath.Join(dir, name)
			if st, err := os.Stat(candidate); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				cmd := exec.Command(candidate, args[n:]...)
				cmd.Env = append(os.Environ(), "PATH="+path)
				return cmd
			}
		}
	}
	t.Fatalf("no plugin for %v on PATH %s", args, path)
	return nil
}

func TestKubectlPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, pluginName), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	planted := writeFile(t, "planted.yaml", twoClassesOneName)

	cmd := kubectlPluginCommand(t, bin, []string{"draxr", "doctor", "-f", planted, "--strict"})
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("kubectl draxr doctor -f --strict: %v, want exit 1\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^warning\s+duplicate-extended-resource-name\s+DeviceClass/gpu-a100,DeviceClass/gpu-h100\s`).Match(out) {
		t.Errorf("kubectl draxr doctor output lacks the finding:\n%s", out)
	}

	cmd = kubectlPluginCommand(t, bin, []string{"draxr", "doctor", "--help"})
	if out, err = cmd.Output(); err != nil || !strings.Contains(string(out), "kubectl draxr doctor [-f FILE|DIR]...") {
		t.Errorf("help: %v, want usage under the plugin's name:\n%s", err, out)
	}
	for _, flag := range []string{"--kubeconfig", "--context", "-n, --namespace", "--kube-client-qps"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("help lacks kubectl's flag %s", flag)
		}
	}

	// As a plugin, no -f means the cluster: with no kubeconfig at all
	// that is a configuration error, not the built-in example.
	cmd = kubectlPluginCommand(t, bin, []string{"draxr", "doctor"})
	cmd.Env = append(cmd.Env, "KUBECONFIG="+filepath.Join(t.TempDir(), "missing"), "HOME="+t.TempDir(), "KUBERNETES_SERVICE_HOST=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "no kubeconfig found") {
		t.Errorf("kubectl draxr doctor without a cluster: %v, stderr %q; want exit 2 naming the kubeconfig", err, stderr.String())
	}
}

func TestNamespaceFlag(t *testing.T) {
	pendingNamespaces := func(t *testing.T, args ...string) map[string]int {
		t.Helper()
		code, out, errOut := draxr(t, append([]string{"simulate", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d; stderr: %s", code, errOut)
		}
		var plan report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		got := map[string]int{}
		for _, s := range plan.ScaleUps {
			for _, p := range s.Pods {
				got[p.Namespace]++
			}
		}
		for _, p := range plan.ExistingNodes {
			got[p.Pod.Namespace]++
		}
		for _, p := range plan.NoScaleUp {
			got[p.Pod.Namespace]++
		}
		return got
	}
	all := pendingNamespaces(t)
	if all["ml"] == 0 || all["shop"] != 30 {
		t.Fatalf("built-in example plans %v, want ml pods and 30 shop pods", all)
	}
	if got := pendingNamespaces(t, "-n", "shop"); len(got) != 1 || got["shop"] != 30 {
		t.Errorf("-n shop plans %v, want only the 30 shop pods", got)
	}
	if got := pendingNamespaces(t, "-n", "nowhere"); len(got) != 0 {
		t.Errorf("-n nowhere plans %v, want nothing", got)
	}
	if code, _, errOut := draxr(t, "capacity", "-n", "ml"); code != 2 || !strings.Contains(errOut, "cluster-wide") {
		t.Errorf("capacity -n: exit %d, stderr %q; want 2 saying capacity is cluster-wide", code, errOut)
	}
}

func TestWatchNeedsCluster(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--watch"},
		{"simulate", "--watch", "-f", scenarios + "/explicit-extended-resource-name/input"},
	} {
		code, out, errOut := draxr(t, args...)
		if code != 2 || !strings.Contains(errOut, "--watch follows a live cluster") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 saying --watch needs a cluster", args, code, out, errOut)
		}
	}
}

// Without -f the built-in example is planned only with a banner saying
// so; with a kubeconfig in $KUBECONFIG the cluster is read instead, so a
// user never gets a verdict about a fake cluster without knowing.
func TestNoSilentExample(t *testing.T) {
	for _, cmd := range []string{"simulate", "capacity", "doctor"} {
		code, _, errOut := draxr(t, cmd)
		if code != 0 || !strings.Contains(errOut, "planning the built-in example (no -f, no cluster)") {
			t.Errorf("%s: exit %d, stderr %q; want 0 with the banner", cmd, code, errOut)
		}
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	code, out, errOut := draxr(t, "doctor")
	if code != 2 || strings.Contains(errOut, "built-in example") || strings.Contains(out, "No problems found") {
		t.Errorf("doctor with $KUBECONFIG: exit %d, stdout %q, stderr %q; want the cluster read (here: exit 2, no kubeconfig)", code, out, errOut)
	}
	planted := writeFile(t, "planted.yaml", twoClassesOneName)
	if code, _, errOut := draxr(t, "doctor", "-f", planted); code != 0 || strings.Contains(errOut, "built-in example") {
		t.Errorf("doctor -f with $KUBECONFIG: exit %d, stderr %q; want the file read", code, errOut)
	}
}
