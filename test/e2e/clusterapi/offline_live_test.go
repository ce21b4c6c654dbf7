package clusterapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/core"
	cpclusterapi "draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/test/clusterapi/infra"
)

// Offline is live: on a Cluster API cluster (a MachineDeployment of min
// 1, max 3 with 2 running machines of 8 GPUs, 30 one-GPU pods of which 16
// bind), `draxr simulate --kubeconfig`, `draxr simulate -f` on a dump of
// the same objects, a draxr-autoscaler in --dry-run beside it and then an
// acting draxr-autoscaler make one decision: the group grows by 1 (to its
// max) for 8 pods, 6 pods get MaxSizeReached; the dry run changes nothing.
func TestOfflineIsLive(t *testing.T) {
	const ns, driver, res = "capi-live", "live.example.com", "example.com/live-gpu"
	ctx, dyn := begin(t, ns)
	createClass(ctx, t, driver, driver, res)
	tmpl, err := infra.Template(ns, "gpu", gpuSlices(driver, 8), "8", false)
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, tmpl)
	slicesJSON, err := yaml.Marshal(gpuSlices(driver, 8))
	if err != nil {
		t.Fatal(err)
	}
	md := machineDeployment(ns, "gpu", map[string]string{
		capi.MinSizeAnnotation: "1", capi.MaxSizeAnnotation: "3",
		capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
		capi.TemplateSlicesAnnotation: string(slicesJSON),
	})
	md.Object["spec"].(map[string]any)["replicas"] = int64(2)
	create(ctx, t, dyn, md)
	createPods(ctx, t, ns, "train", 30, res)
	waitBound(ctx, t, ns, 16)
	eventually(ctx, t, time.Minute, "14 pods unschedulable", func() error {
		if n := unschedulablePods(ctx, t, ns); n != 14 {
			return fmt.Errorf("%d unschedulable", n)
		}
		return nil
	})
	// The pods bind as soon as the nodes register; a Machine gets its
	// providerID a moment later, and until then no autoscaler (nor CA)
	// counts that node as the group's.
	eventually(ctx, t, time.Minute, "both Machines linked to their nodes", func() error {
		list, err := dyn.Resource(cpclusterapi.GVR(capi.Machine)).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		linked := 0
		for _, m := range list.Items {
			id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
			if _, err := cp.Client.CoreV1().Nodes().Get(ctx, strings.TrimPrefix(id, infra.ProviderIDPrefix), metav1.GetOptions{}); id != "" && err == nil {
				linked++
			}
		}
		if linked != 2 {
			return fmt.Errorf("%d of %d machines linked", linked, len(list.Items))
		}
		return nil
	})
	discovery := "--node-group-auto-discovery=clusterapi:namespace=" + ns + ",clusterName=" + clusterName
	group := capi.MachineDeployment + "/" + ns + "/gpu"

	live := simulate(t, "--kubeconfig="+cp.AdminKubeconfig, "-n", ns, discovery, "--scale-down")
	dump := simulate(t, "-f", writeDump(ctx, t, dyn, ns), "-n", ns, discovery)
	for name, plan := range map[string]*report.SimulateOutput{"live": live, "dump": dump} {
		if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != group || plan.ScaleUps[0].NewNodes != 1 ||
			len(plan.ScaleUps[0].Pods) != 8 || len(plan.NoScaleUp) != 6 {
			t.Errorf("%s plan: %+v, %d pods without a scale-up, %d placed on existing nodes, groups %+v; want %s +1 for 8 pods, 6 left (max 3)", name, plan.ScaleUps, len(plan.NoScaleUp), len(plan.ExistingNodes), plan.Groups, group)
		}
	}
	// Both members run 8 one-GPU pods: scale-down keeps them, and says so.
	for _, v := range live.ScaleDown {
		if v.NodeGroup != group || v.Verdict != scaledown.Kept || v.Code != scaledown.NotUnderutilized {
			t.Errorf("scale-down verdict %+v, want %s kept as NotUnderutilized", v, group)
		}
	}
	if len(live.ScaleDown) != 2 {
		t.Errorf("scale-down verdicts %+v, want one for each of the 2 members", live.ScaleDown)
	}
	if len(live.ScaleUps) == 1 && len(dump.ScaleUps) == 1 && !slices.Equal(podRefs(live), podRefs(dump)) {
		t.Errorf("live plan helps %v, dump plan %v", podRefs(live), podRefs(dump))
	}

	// The dry run, alone first: it says what it would do and does nothing.
	startDryRunAutoscaler(t, ns)
	var status core.DraxrStatus
	eventually(ctx, t, time.Minute, "the dry run's decision", func() error {
		cm, err := cp.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, core.DryRunStatusConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status = core.DraxrStatus{}
		if err := yaml.Unmarshal([]byte(cm.Data["draxr"]), &status); err != nil {
			return err
		}
		if status.ScaleUp == nil {
			return fmt.Errorf("no scale-up in %s", cm.Data["draxr"])
		}
		return nil
	})
	if !status.DryRun || status.ScaleUp.NodeGroup != group || status.ScaleUp.NewNodes != 1 || status.ScaleUp.Pods != 8 ||
		!slices.Contains(status.WouldCall, "IncreaseSize "+group+" +1") {
		t.Errorf("dry run: %+v (would call %v); want %s +1 for 8 pods, marked dry run", status.ScaleUp, status.WouldCall, group)
	}
	replicasStay(ctx, t, dyn, ns, "gpu", 2, "the dry run changes nothing")

	// The acting autoscaler beside it does what the dry run said.
	startAutoscaler(t, ns)
	eventually(ctx, t, time.Minute, "the group grown to 3", func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "gpu"); got != 3 {
			return fmt.Errorf("replicas = %d", got)
		}
		return nil
	})
	replicasStay(ctx, t, dyn, ns, "gpu", 3, "at max size")
}

func unschedulablePods(ctx context.Context, t *testing.T, ns string) int {
	t.Helper()
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if p.Spec.NodeName == "" && c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				n++
			}
		}
	}
	return n
}

func simulate(t *testing.T, args ...string) *report.SimulateOutput {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins, "draxr"), append([]string{"simulate", "-o", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("draxr simulate %v: %v\n%s", args, err, stderr.String())
	}
	var out report.SimulateOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("draxr simulate %v: %v\n%s", args, err, stdout.String())
	}
	return &out
}

func podRefs(p *report.SimulateOutput) []string {
	var out []string
	for _, r := range p.ScaleUps[0].Pods {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

// writeDump writes what `kubectl get <kinds> -A -o yaml` would of the
// cluster: one List of the objects the planner reads, the group's Cluster
// API objects and infrastructure template, and a Secret and a Service the
// planner skips.
func writeDump(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) string {
	t.Helper()
	var items []any
	addTyped := func(gv schema.GroupVersion, kind string, objs any) {
		raw, err := json.Marshal(objs)
		if err != nil {
			t.Fatal(err)
		}
		var list []map[string]any
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		for _, o := range list {
			o["apiVersion"], o["kind"] = gv.String(), kind
			items = append(items, o)
		}
	}
	c := cp.Client
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, err)
	addTyped(v1.SchemeGroupVersion, "Node", nodes.Items)
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	must(t, err)
	addTyped(v1.SchemeGroupVersion, "Pod", pods.Items)
	slicesList, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	must(t, err)
	resourceGV := schema.GroupVersion{Group: "resource.k8s.io", Version: "v1"}
	addTyped(resourceGV, "ResourceSlice", slicesList.Items)
	classes, err := c.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	must(t, err)
	addTyped(resourceGV, "DeviceClass", classes.Items)
	claims, err := c.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	must(t, err)
	addTyped(resourceGV, "ResourceClaim", claims.Items)
	secrets, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	addTyped(v1.SchemeGroupVersion, "Secret", secrets.Items)
	services, err := c.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	must(t, err)
	addTyped(v1.SchemeGroupVersion, "Service", services.Items)
	for _, kind := range []string{capi.MachineDeployment, capi.MachineSet, capi.Machine, "Cluster"} {
		list, err := dyn.Resource(cpclusterapi.GVR(kind)).Namespace(ns).List(ctx, metav1.ListOptions{})
		must(t, err)
		for _, u := range list.Items {
			u.SetKind(kind)
			u.SetAPIVersion(capi.APIVersion)
			items = append(items, u.Object)
		}
	}
	templates, err := dyn.Resource(schema.GroupVersionResource{Group: infra.Group, Version: infra.Version,
		Resource: strings.ToLower(infra.TemplateKind) + "s"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, u := range templates.Items {
		u.SetKind(infra.TemplateKind)
		u.SetAPIVersion(infra.Group + "/" + infra.Version)
		items = append(items, u.Object)
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	must(t, err)
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	must(t, os.WriteFile(path, data, 0o644))
	return path
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startDryRunAutoscaler runs draxr-autoscaler --dry-run with its own
// service account, whose Role names the dry run's status ConfigMap and
// lease, as the chart renders it with extraArgs dry-run: true.
func startDryRunAutoscaler(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	rbac, err := os.ReadFile(filepath.Join(root, "autoscaler/deploy/rbac.yaml"))
	must(t, err)
	text := strings.NewReplacer("cluster-autoscaler-status", core.DryRunStatusConfigMapName,
		"name: draxr-autoscaler\n", "name: draxr-autoscaler-dry-run\n", `"draxr-autoscaler"`, `"draxr-autoscaler-dry-run"`).Replace(string(rbac))
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	must(t, os.WriteFile(path, []byte(text), 0o644))
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, "draxr-autoscaler-dry-run", path, "kube-system/draxr-autoscaler-dry-run")
	must(t, err)
	args := []string{"--kubeconfig=" + kubeconfig, "--cloud-provider=clusterapi", "--dry-run",
		"--node-group-auto-discovery=clusterapi:namespace=" + ns + ",clusterName=" + clusterName,
		"--scheduler-config=" + filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		"--scan-interval=1s", "--leader-elect=false", "--address=127.0.0.1:0", "--v=2"}
	p, err := cp.StartProcess("draxr-autoscaler-dry-run-"+ns, filepath.Join(bins, "draxr-autoscaler"), args...)
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dry-run autoscaler log:\n%s", p.LogTail(8000))
		}
		p.Stop(10 * time.Second)
	})
}
