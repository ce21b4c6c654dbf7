package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/report"
)

// draxr doctor and draxr simulate read the live cluster the way they read
// a dump of it: doctor finds a planted pitfall there, and simulate prints
// the same plan and capacity table from the cluster as from
// `kubectl get -o yaml` of it.
func TestDraxrCLILive(t *testing.T) {
	e := newEnv(t, "cli")
	old := e.class("cli-old", e.driver, e.resource)
	e.classNewerThan(old, "cli-new", e.driver, e.resource)
	e.draNode("cli-a", e.driver, 2)
	// Four GPUs each: more than cli-a has, so they stay pending (nothing
	// scales up here) and the plan needs the node group.
	for i := range 3 {
		name := fmt.Sprintf("big-%d", i)
		e.pod(name, e.resource, 4)
		e.waitUnschedulable(name)
	}
	dir := t.TempDir()
	draxrBin := filepath.Join(dir, "draxr")
	if out, err := goCmd("build", "-o", draxrBin, "./autoscaler/cmd/draxr").CombinedOutput(); err != nil {
		t.Fatalf("build draxr: %v\n%s", err, out)
	}
	groups := filepath.Join(dir, "groups.yaml")
	writeTestFile(t, groups, fmt.Sprintf(`apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: cli-gpu}
spec:
  minSize: 0
  maxSize: 5
  template:
    metadata: {labels: {e2e-test: %s}}
    status: {capacity: {cpu: "32", memory: 128Gi, pods: "110"}}
  resourceSlices:
  - driver: %s
    devices: [{name: g0}, {name: g1}, {name: g2}, {name: g3}, {name: g4}, {name: g5}, {name: g6}, {name: g7}]
`, e.name, e.driver))

	code, out, errOut := runDraxr(t, draxrBin, "doctor", "--kubeconfig", cp.AdminKubeconfig, "--strict")
	if code != 1 {
		t.Errorf("doctor --kubeconfig --strict: exit %d, want 1 (findings); stderr: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^warning\s+duplicate-extended-resource-name\s+DeviceClass/cli-new,DeviceClass/cli-old\s+.*cli-new wins`).MatchString(out) {
		t.Errorf("doctor --kubeconfig does not name both classes and the winner:\n%s", out)
	}

	dump := filepath.Join(dir, "cluster.yaml")
	writeTestFile(t, dump, string(e.dumpCluster()))
	code, fromFiles, errOut := runDraxr(t, draxrBin, "simulate", "-f", dump, "-f", groups, "-o", "json")
	if code != 0 {
		t.Fatalf("simulate -f: exit %d; stderr: %s", code, errOut)
	}
	code, fromCluster, errOut := runDraxr(t, draxrBin, "simulate", "--kubeconfig", cp.AdminKubeconfig,
		"--node-group-config", groups, "--kube-client-qps", "50", "--kube-client-burst", "100", "-o", "json")
	if code != 0 {
		t.Fatalf("simulate --kubeconfig: exit %d; stderr: %s", code, errOut)
	}
	if fromCluster != fromFiles {
		t.Errorf("simulate --kubeconfig and simulate -f on a dump differ:\n--- cluster\n%s\n--- dump\n%s", fromCluster, fromFiles)
	}
	// draxr dump's own dump plans as the cluster does.
	code, dumped, errOut := runDraxr(t, draxrBin, "dump", "--kubeconfig", cp.AdminKubeconfig)
	if code != 0 {
		t.Fatalf("dump --kubeconfig: exit %d; stderr: %s", code, errOut)
	}
	ownDump := filepath.Join(dir, "dumped.yaml")
	writeTestFile(t, ownDump, dumped)
	if code, fromOwnDump, errOut := runDraxr(t, draxrBin, "simulate", "-f", ownDump, "-f", groups, "-o", "json"); code != 0 || fromOwnDump != fromCluster {
		t.Errorf("simulate -f on draxr dump's output: exit %d, stderr %s; differs from simulate --kubeconfig:\n--- cluster\n%s\n--- draxr dump\n%s",
			code, errOut, fromCluster, fromOwnDump)
	}
	code, capFromFiles, errOut := runDraxr(t, draxrBin, "capacity", "-f", dump, "-f", groups)
	if code != 0 {
		t.Fatalf("capacity -f: exit %d; stderr: %s", code, errOut)
	}
	code, capFromCluster, errOut := runDraxr(t, draxrBin, "capacity", "--kubeconfig", cp.AdminKubeconfig, "--node-group-config", groups)
	if code != 0 {
		t.Fatalf("capacity --kubeconfig: exit %d; stderr: %s", code, errOut)
	}
	if capFromCluster != capFromFiles || !regexp.MustCompile(`(?m)^cli-old\s+2\s+0\s+2\b`).MatchString(capFromCluster) {
		t.Errorf("capacity --kubeconfig and capacity -f on a dump differ, or cli-old lacks 2 free devices:\n--- cluster\n%s\n--- dump\n%s", capFromCluster, capFromFiles)
	}
	// Three 4-GPU pods on 8-GPU nodes: two new nodes.
	if !regexp.MustCompile(`"nodeGroup": "cli-gpu",\s+"newNodes": 2`).MatchString(fromCluster) {
		t.Errorf("plan does not grow cli-gpu by 2:\n%s", fromCluster)
	}
	// The third reading of the same cluster: one draxr-autoscaler loop, in
	// dry run, with the local provider's NodeGroups from the same file.
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(fromCluster), &plan); err != nil {
		t.Fatal(err)
	}
	if loop := dryRunLoop(t, e, groups); len(plan.ScaleUps) == 0 || loop.ScaleUp == nil ||
		loop.ScaleUp.NodeGroup != plan.ScaleUps[0].NodeGroup || loop.ScaleUp.NewNodes != plan.ScaleUps[0].NewNodes ||
		len(loop.ScaleUp.Pods) != len(plan.ScaleUps[0].Pods) {
		t.Errorf("the autoscaler's loop scales up %+v; simulate planned %+v", loop.ScaleUp, plan.ScaleUps)
	}

	// --watch prints the plan, then a new one when two more pods come.
	watch := exec.CommandContext(t.Context(), draxrBin, "simulate", "--watch", "--watch-quiet-period", "500ms",
		"--kubeconfig", cp.AdminKubeconfig, "--node-group-config", groups, "-n", e.ns, "-o", "json")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var watchErr bytes.Buffer
	watch.Stderr = &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	plans := make(chan report.SimulateOutput)
	go func() {
		defer close(plans)
		dec := json.NewDecoder(stdout)
		for {
			var p report.SimulateOutput
			if dec.Decode(&p) != nil {
				return
			}
			select {
			case plans <- p:
			case <-e.ctx.Done():
				return
			}
		}
	}()
	nextGrowth := func() int {
		t.Helper()
		select {
		case p, ok := <-plans:
			if !ok {
				t.Fatalf("simulate --watch ended; stderr: %s", watchErr.String())
			}
			for _, s := range p.ScaleUps {
				if s.NodeGroup == "cli-gpu" {
					return s.NewNodes
				}
			}
			return 0
		case <-e.ctx.Done():
			t.Fatalf("no plan from simulate --watch; stderr: %s", watchErr.String())
		}
		return -1
	}
	if n := nextGrowth(); n != 2 {
		t.Errorf("first watched plan grows cli-gpu by %d, want 2", n)
	}
	e.pod("big-3", e.resource, 4)
	e.pod("big-4", e.resource, 4)
	// The two pods may be planned one at a time: +3 comes last.
	for n := nextGrowth(); n != 3; n = nextGrowth() {
		if n != 2 {
			t.Fatalf("watched plan grows cli-gpu by %d, want 2 then 3", n)
		}
	}
	if err := watch.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range plans { // drain until the process closes its output
	}
	if err := watch.Wait(); err != nil {
		t.Errorf("simulate --watch after an interrupt: %v, want exit 0; stderr: %s", err, watchErr.String())
	}
}

func runDraxr(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("%s: %v", bin, err)
	return 0, "", ""
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dumpCluster is `kubectl get nodes,pods,resourceslices,deviceclasses,
// resourceclaims,resourceclaimtemplates -A -o yaml`, one document per object.
func (e *env) dumpCluster() []byte {
	e.t.Helper()
	var buf bytes.Buffer
	add := func(gvk schema.GroupVersionKind, obj runtime.Object) {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		b, err := yaml.Marshal(obj)
		if err != nil {
			e.t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	core := schema.GroupVersion{Version: "v1"}
	res := schema.GroupVersion{Group: "resource.k8s.io", Version: "v1"}
	opts := metav1.ListOptions{}
	c := cp.Client
	nodes, err := c.CoreV1().Nodes().List(e.ctx, opts)
	mustNoErr(e.t, err)
	for i := range nodes.Items {
		add(core.WithKind("Node"), &nodes.Items[i])
	}
	pods, err := c.CoreV1().Pods("").List(e.ctx, opts)
	mustNoErr(e.t, err)
	for i := range pods.Items {
		add(core.WithKind("Pod"), &pods.Items[i])
	}
	slices, err := c.ResourceV1().ResourceSlices().List(e.ctx, opts)
	mustNoErr(e.t, err)
	for i := range slices.Items {
		add(res.WithKind("ResourceSlice"), &slices.Items[i])
	}
	classes, err := c.ResourceV1().DeviceClasses().List(e.ctx, opts)
	mustNoErr(e.t, err)
	for i := range classes.Items {
		add(res.WithKind("DeviceClass"), &classes.Items[i])
	}
	claims, err := c.ResourceV1().ResourceClaims("").List(e.ctx, opts)
	mustNoErr(e.t, err)
	for i := range claims.Items {
		add(res.WithKind("ResourceClaim"), &claims.Items[i])
	}
	templates, err := c.ResourceV1().ResourceClaimTemplates("").List(e.ctx, opts)
	mustNoErr(e.t, err)
	for i := range templates.Items {
		add(res.WithKind("ResourceClaimTemplate"), &templates.Items[i])
	}
	return buf.Bytes()
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dryRunLoop runs one draxr-autoscaler loop over the control plane in dry
// run, with the NodeGroups in groupsFile.
func dryRunLoop(t *testing.T, e *env, groupsFile string) *core.LoopResult {
	t.Helper()
	objs, err := input.LoadPaths([]string{groupsFile})
	if err != nil {
		t.Fatal(err)
	}
	provider, err := local.New(local.Options{Client: cp.Client, Groups: objs.NodeGroups, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	exp, err := expander.New("least-waste", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := core.New(core.Config{Client: cp.Client, View: listers, Provider: provider, Expander: exp, DryRun: true,
		Recorder: &record.FakeRecorder{}})
	res, err := a.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
