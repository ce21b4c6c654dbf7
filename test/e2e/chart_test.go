package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"draxr.dev/draxr/test/chart"
	"draxr.dev/draxr/test/controlplane"
)

// The chart, rendered with Helm's library and applied to the control
// plane (which authorizes with RBAC), is all draxr-autoscaler needs: run
// with the chart's arguments, configuration and node groups, and the
// token of the chart's ServiceAccount, it scales a group up for pending
// pods and back down when they go. The same token is refused what the
// chart does not grant.
func TestChartAutoscalerRBAC(t *testing.T) {
	e := newEnv(t, "chart")
	e.class(e.name+"-gpu", e.driver, e.resource)
	const release, ns = "draxr-e2e", "draxr-e2e"
	group := e.name + "-gpu"
	var groups []any
	for _, ng := range e.nodeGroupObjects(groupSpec{name: group, min: 0, max: 4, draDevices: 8}) {
		groups = append(groups, toMap(t, ng))
	}
	values := map[string]any{
		"autoscaler": map[string]any{
			// The test runs the binary itself: the Deployment stays without pods.
			"replicas":      0,
			"cloudProvider": "local",
			"nodeGroups":    groups,
			"extraArgs": map[string]any{
				"scan-interval": "1s", "scale-down-unneeded-time": "2s", "scale-down-delay-after-add": "0s",
				"local-node-ready-delay": "1s", "local-slices-delay": "1s", "v": 2,
			},
		},
		"scheduler": map[string]any{"replicas": 0},
		// Applied to check its objects are valid; no DaemonSet controller
		// runs here, and its class maps a name of its own.
		"exampleDriver": map[string]any{"enabled": true, "driverName": "chart-e2e.example.com",
			"deviceClass": map[string]any{"name": "chart-e2e-example", "extendedResourceName": "chart-e2e.example.com/gpu"}},
	}
	docs, err := chart.Render(chart.Dir(root), release, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	objs := []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}}
	for _, d := range docs {
		objs = append(objs, d.Object)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cp.DeleteObjects(ctx, objs); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	if err := cp.ApplyObjects(e.ctx, objs); err != nil {
		t.Fatal(err)
	}

	// The chart's ServiceAccount token, minted through the TokenRequest API.
	token, err := cp.ServiceAccountToken(e.ctx, ns, release+"-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "autoscaler.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, cp.URL, cp.AdminConfig.CAData, token); err != nil {
		t.Fatal(err)
	}
	args := chartArgs(t, docs, release+"-autoscaler")
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// After the chart's: a later flag wins.
	args = append(args, "--kubeconfig="+kubeconfig, fmt.Sprintf("--address=127.0.0.1:%d", port))
	p, err := cp.StartProcess("draxr-autoscaler-chart", filepath.Join(bins, "draxr-autoscaler"), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("autoscaler args %v\nlog:\n%s", args, p.LogTail(8000))
		}
		p.Stop(10 * time.Second)
	})

	// Scale-up: three 5-device pods on 8-device nodes take a node each.
	e.replicaSet("work", 3, e.resource, 5)
	if perNode := e.waitPodsBound(3, 120*time.Second); len(perNode) != 3 {
		t.Fatalf("pods per node = %v, want one on each of 3 nodes", perNode)
	}
	if n := len(e.groupNodes(group)); n < 3 {
		t.Fatalf("group has %d nodes for three 5-device pods, want 3", n)
	}
	// Its status and its lease, in the release's namespace, by the Role.
	e.eventually(30*time.Second, "status ConfigMap written", func() error {
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(e.ctx, "cluster-autoscaler-status", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !strings.Contains(cm.Data["status"], group) {
			return fmt.Errorf("status does not name %s:\n%s", group, cm.Data["status"])
		}
		return nil
	})
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(e.ctx, "draxr-autoscaler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("leader lease %s/draxr-autoscaler: %v %+v", ns, err, lease)
	}

	// Scale-down: two pods go, then the last; so do their nodes.
	e.scaleReplicaSet("work", 1)
	e.eventually(90*time.Second, "one node left for one pod", func() error {
		if n := len(e.groupNodes(group)); n != 1 {
			return fmt.Errorf("group has %d nodes", n)
		}
		return nil
	})
	e.waitPodsBound(1, 60*time.Second)
	e.scaleReplicaSet("work", 0)
	e.eventually(60*time.Second, "every node removed", func() error {
		if n := len(e.groupNodes(group)); n != 0 {
			return fmt.Errorf("group has %d nodes", n)
		}
		return nil
	})
	if log := p.LogTail(1 << 22); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the autoscaler was refused something with the chart's RBAC:\n%s", grepLines(strings.ToLower(log), "forbidden"))
	}

	// Not too much: the same token reads nodes but touches no Secret, no
	// other ConfigMap, no workload.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the chart's token cannot list nodes: %v", err)
	}
	secret, err := cp.Client.CoreV1().Secrets(ns).Create(e.ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-yours"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := cp.Client.CoreV1().ConfigMaps(ns).Create(e.ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-the-status"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Data = map[string]string{"k": "v"}
	refused := map[string]error{}
	_, refused["list secrets in kube-system"] = sa.CoreV1().Secrets("kube-system").List(e.ctx, metav1.ListOptions{})
	refused["delete a secret in its namespace"] = sa.CoreV1().Secrets(ns).Delete(e.ctx, secret.Name, metav1.DeleteOptions{})
	_, refused["update a ConfigMap other than its status"] = sa.CoreV1().ConfigMaps(ns).Update(e.ctx, other, metav1.UpdateOptions{})
	_, refused["create a Deployment"] = sa.AppsV1().Deployments(e.ns).Create(e.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	for what, err := range refused {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: err = %v, want Forbidden", what, err)
		}
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Get(e.ctx, secret.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("secret gone: %v", err)
	}
}

// chartArgs are the autoscaler container's arguments in the rendered
// Deployment, with each ConfigMap volume's mount path replaced by a local
// folder holding that ConfigMap's rendered files.
func chartArgs(t *testing.T, docs []chart.Doc, name string) []string {
	t.Helper()
	d := chart.Find(docs, "Deployment", name)
	if d == nil {
		t.Fatalf("chart rendered no Deployment %s", name)
	}
	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &dep); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	mounts := map[string]string{} // mount path -> local folder
	for _, vm := range c.VolumeMounts {
		for _, vol := range dep.Spec.Template.Spec.Volumes {
			if vol.Name != vm.Name || vol.ConfigMap == nil {
				continue
			}
			cm := chart.Find(docs, "ConfigMap", vol.ConfigMap.Name)
			if cm == nil {
				t.Fatalf("volume %s: chart rendered no ConfigMap %s", vol.Name, vol.ConfigMap.Name)
			}
			dir := filepath.Join(t.TempDir(), vol.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object.Object, "data")
			for file, content := range data {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mounts[vm.MountPath] = dir
		}
	}
	args := append([]string(nil), c.Args...)
	for i, a := range args {
		flag, value, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(value, "/") {
			continue
		}
		local := ""
		for mp, dir := range mounts {
			if value == mp || strings.HasPrefix(value, mp+"/") {
				local = dir + strings.TrimPrefix(value, mp)
			}
		}
		if local == "" {
			t.Fatalf("argument %s names a path no ConfigMap volume provides", a)
		}
		args[i] = flag + "=" + local
	}
	return args
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
