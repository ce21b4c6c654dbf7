package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/app"
	"draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/simulator/placement"
)

const root = "../.."

func render(t *testing.T, values map[string]any) []Doc {
	t.Helper()
	docs, err := Render(Dir(root), "draxr", "autoscaling", values)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func mustFind(t *testing.T, docs []Doc, kind, name string) *unstructured.Unstructured {
	t.Helper()
	d := Find(docs, kind, name)
	if d == nil {
		var have []string
		for _, d := range docs {
			have = append(have, d.Kind()+"/"+d.Name())
		}
		t.Fatalf("no %s %s rendered; have %v", kind, name, have)
	}
	return d.Object
}

// container returns the first container's image and args of a workload.
func container(t *testing.T, obj *unstructured.Unstructured) (image string, args []string) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s %s has no containers", obj.GetKind(), obj.GetName())
	}
	c := cs[0].(map[string]any)
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	return c["image"].(string), args
}

func rules(t *testing.T, obj *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var r rbacv1.ClusterRole // a Role has the same shape
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r); err != nil {
		t.Fatal(err)
	}
	return r.Rules
}

// grants says whether rules allow verb on group/resource (named name, or
// any name when name is "").
func grants(rs []rbacv1.PolicyRule, group, resource, name, verb string) bool {
	for _, r := range rs {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// Helm's lint action (Strict: warnings fail too) passes on the default
// values and on every part switched on with each provider.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(KubeVersion())
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{
		"default": nil,
		"plain":   PlainValues(),
		"clusterapi": {"autoscaler": map[string]any{"cloudProvider": "clusterapi",
			"clusterAPI": map[string]any{"autoDiscovery": []any{"clusterapi:namespace=default"}}},
			"exampleDriver": map[string]any{"enabled": true}},
	} {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict, l.Namespace, l.KubeVersion = true, "kube-system", kv
			res := l.Run([]string{Dir(root)}, values)
			for _, m := range res.Messages {
				t.Logf("lint: %s", m.Error())
			}
			if len(res.Errors) > 0 || action.HasWarningsOrErrors(res) {
				t.Fatalf("helm lint: %v", res.Errors)
			}
			if res.TotalChartsLinted != 1 {
				t.Fatalf("linted %d charts, want 1", res.TotalChartsLinted)
			}
		})
	}
}

// Values become the autoscaler's flags by CA's names; the chart's own
// settings (provider, namespace, configs) come first, and the binary's
// flag set parses the lot.
func TestAutoscalerFlagsFromValues(t *testing.T) {
	docs := render(t, map[string]any{
		"image": map[string]any{"registry": "registry.example:5000/team"},
		"autoscaler": map[string]any{
			"cloudProvider": "clusterapi",
			"clusterAPI":    map[string]any{"autoDiscovery": []any{"clusterapi:namespace=prod,clusterName=a"}},
			"image":         map[string]any{"tag": "v9"},
			"extraArgs": map[string]any{
				"scan-interval":                    "30s",
				"expander":                         "priority,least-waste",
				"max-node-provision-time":          "20m",
				"skip-nodes-with-local-storage":    false,
				"status-config-map-name":           "my-status",
				"scale-down-utilization-threshold": 0.7,
				"leader-elect":                     nil,
			},
		},
	})
	image, args := container(t, mustFind(t, docs, "Deployment", "draxr-autoscaler"))
	if image != "registry.example:5000/team/draxr-autoscaler:v9" {
		t.Errorf("image = %s", image)
	}
	for _, want := range []string{
		"--cloud-provider=clusterapi", "--namespace=autoscaling", "--scheduler-config=/etc/draxr/scheduler/scheduler-config.yaml",
		"--node-group-auto-discovery=clusterapi:namespace=prod,clusterName=a", "--scan-interval=30s",
		"--expander=priority,least-waste", "--max-node-provision-time=20m", "--skip-nodes-with-local-storage=false",
		"--status-config-map-name=my-status", "--scale-down-utilization-threshold=0.7", "--leader-elect",
		"--leader-elect-resource-name=draxr-autoscaler", "--address=:8085",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--node-group-config") {
			t.Errorf("clusterapi provider got %s", a)
		}
	}
	fs := app.NewCommand().Flags()
	if err := fs.Parse(args); err != nil {
		t.Fatalf("draxr-autoscaler rejects the chart's args %v: %v", args, err)
	}
	if v, _ := fs.GetString("status-config-map-name"); v != "my-status" {
		t.Errorf("--status-config-map-name parsed as %q", v)
	}
	// The Role lets it write that ConfigMap and no other.
	rs := rules(t, mustFind(t, docs, "Role", "draxr-autoscaler"))
	if !grants(rs, "", "configmaps", "my-status", "update") || grants(rs, "", "configmaps", "cluster-autoscaler-status", "update") {
		t.Errorf("Role rules do not follow status-config-map-name: %+v", rs)
	}
}

// The local provider with the default values otherwise: the image make
// images builds (the chart's appVersion), CA's status ConfigMap name and
// port, a Service for /metrics, node groups from values in a mounted
// ConfigMap.
func TestAutoscalerLocalDefaults(t *testing.T) {
	ch, err := loader.Load(Dir(root))
	if err != nil {
		t.Fatal(err)
	}
	group := map[string]any{"apiVersion": "draxr.dev/v1alpha1", "kind": "NodeGroup", "metadata": map[string]any{"name": "gpu"},
		"spec": map[string]any{"minSize": 0, "maxSize": 3}}
	docs := render(t, map[string]any{"autoscaler": map[string]any{"cloudProvider": "local", "nodeGroups": []any{group, group}}})
	image, args := container(t, mustFind(t, docs, "Deployment", "draxr-autoscaler"))
	if want := "draxr.dev/draxr-autoscaler:" + ch.Metadata.AppVersion; image != want {
		t.Errorf("image = %s, want %s", image, want)
	}
	for _, want := range []string{"--cloud-provider=local", "--node-group-config=/etc/draxr/nodegroups",
		"--status-config-map-name=cluster-autoscaler-status", "--address=:8085"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
	if err := app.NewCommand().Flags().Parse(args); err != nil {
		t.Fatalf("draxr-autoscaler rejects the chart's args: %v", err)
	}
	cm := mustFind(t, docs, "ConfigMap", "draxr-autoscaler-node-groups")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "nodegroups.yaml")
	if got := strings.Count(data, "kind: NodeGroup"); got != 2 || !strings.Contains(data, "\n---\n") {
		t.Errorf("node groups ConfigMap holds %d groups:\n%s", got, data)
	}
	svc := mustFind(t, docs, "Service", "draxr-autoscaler")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(ports) != 1 || fmt.Sprint(ports[0].(map[string]any)["port"]) != "8085" {
		t.Errorf("Service ports = %v", ports)
	}
	cr := rules(t, mustFind(t, docs, "ClusterRole", "draxr-autoscaler"))
	if !grants(cr, "", "nodes", "", "create") || !grants(cr, "resource.k8s.io", "resourceslices", "", "create") {
		t.Errorf("local provider cannot create nodes and slices: %+v", cr)
	}
	if grants(cr, "cluster.x-k8s.io", "machinedeployments", "", "list") || grants(cr, "", "configmaps", "", "get") {
		t.Errorf("local provider gets Cluster API rights: %+v", cr)
	}
}

// The clusterapi provider gets Cluster API rights and cannot create nodes
// or publish slices.
func TestAutoscalerClusterAPIRBAC(t *testing.T) {
	docs := render(t, map[string]any{"autoscaler": map[string]any{"cloudProvider": "clusterapi"}})
	cr := rules(t, mustFind(t, docs, "ClusterRole", "draxr-autoscaler"))
	if !grants(cr, "cluster.x-k8s.io", "machinedeployments/scale", "", "update") || !grants(cr, "cluster.x-k8s.io", "machines", "", "update") {
		t.Errorf("clusterapi provider cannot scale: %+v", cr)
	}
	if grants(cr, "", "nodes", "", "create") || grants(cr, "resource.k8s.io", "resourceslices", "", "create") {
		t.Errorf("clusterapi provider may create nodes or slices: %+v", cr)
	}
	// Infrastructure templates are read for scale from zero (CA's RBAC),
	// read only; a provider's own group is added by value.
	if !grants(cr, "infrastructure.cluster.x-k8s.io", "*", "", "get") || !grants(cr, "infrastructure.cluster.x-k8s.io", "*", "", "watch") ||
		grants(cr, "infrastructure.cluster.x-k8s.io", "*", "", "update") {
		t.Errorf("clusterapi provider: infrastructure templates not readable and watchable, or writable: %+v", cr)
	}
	docs = render(t, map[string]any{"autoscaler": map[string]any{"cloudProvider": "clusterapi",
		"clusterAPI": map[string]any{"infrastructureGroups": []any{"infrastructure.cluster.x-k8s.io", "infrastructure.example.com"}}}})
	cr = rules(t, mustFind(t, docs, "ClusterRole", "draxr-autoscaler"))
	if !grants(cr, "infrastructure.example.com", "*", "", "get") {
		t.Errorf("infrastructureGroups value not granted: %+v", cr)
	}
}

// Bad values fail the render with a message naming the value.
func TestBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"provider":    {map[string]any{"autoscaler": map[string]any{"cloudProvider": "aws"}}, `at '/autoscaler/cloudProvider': value must be one of '', 'local', 'kwok', 'clusterapi'`},
		"owned flag":  {map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"cloud-provider": "local"}}}, "autoscaler.extraArgs.cloud-provider"},
		"groups+capi": {map[string]any{"autoscaler": map[string]any{"cloudProvider": "clusterapi", "nodeGroupsConfigMap": "x"}}, "autoscaler.nodeGroups"},
		"groups+kwok": {map[string]any{"autoscaler": map[string]any{"cloudProvider": "kwok", "nodeGroupsConfigMap": "x"}},
			"the kwok provider reads node groups from the kwok-provider-config ConfigMap"},
		"kwok and clusterAPIMode": {map[string]any{"cloudProvider": "kwok", "clusterAPIMode": "single-kubeconfig"}, "clusterAPIMode: single-kubeconfig needs cloudProvider clusterapi"},
		"kubeconfig and mode": {map[string]any{"clusterAPIMode": "single-kubeconfig", "autoscaler": map[string]any{"extraArgs": map[string]any{"kubeconfig": "/k"}}},
			"autoscaler.extraArgs.kubeconfig: the chart sets --kubeconfig from clusterAPIMode single-kubeconfig"},
		"owned flag source": {map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"namespace": "x"}}},
			"autoscaler.extraArgs.namespace: the chart sets --namespace from the release's namespace"},
		"externalgrpc without address": {map[string]any{"cloudProvider": "externalgrpc"},
			"autoscaler.externalGRPC.address: cloudProvider externalgrpc needs the provider service's host:port"},
		"externalgrpc address without port": {map[string]any{"cloudProvider": "externalgrpc", "autoscaler": map[string]any{"externalGRPC": map[string]any{"address": "provider"}}},
			"at '/autoscaler/externalGRPC/address'"},
		"externalgrpc with node groups": {map[string]any{"cloudProvider": "externalgrpc",
			"autoscaler": map[string]any{"nodeGroupsConfigMap": "x", "externalGRPC": map[string]any{"address": "p:1"}}},
			"the externalgrpc provider's service lists the node groups"},
		"externalgrpc cloud-config by hand": {map[string]any{"cloudProvider": "externalgrpc",
			"autoscaler": map[string]any{"externalGRPC": map[string]any{"address": "p:1"}, "extraArgs": map[string]any{"cloud-config": "/x"}}},
			"autoscaler.extraArgs.cloud-config: the chart sets --cloud-config from autoscaler.externalGRPC"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Dir(root), "draxr", "kube-system", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// The scheduler's ConfigMap is scheduler/deploy/scheduler-config.yaml with
// the release's lease and scheduler name, and loads as a profile.
func TestSchedulerConfig(t *testing.T) {
	docs := render(t, map[string]any{"scheduler": map[string]any{"enabled": true, "schedulerName": "draxr-scheduler", "extraArgs": []any{"--v=4"}}})
	cm := mustFind(t, docs, "ConfigMap", "draxr-scheduler-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	var got, src map[string]any
	if err := yaml.Unmarshal([]byte(data), &got); err != nil {
		t.Fatal(err)
	}
	srcData, err := os.ReadFile(filepath.Join(root, SchedulerConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(srcData, &src); err != nil {
		t.Fatal(err)
	}
	le := got["leaderElection"].(map[string]any)
	if le["resourceNamespace"] != "autoscaling" || le["resourceName"] != "draxr-scheduler" || le["leaderElect"] != true {
		t.Errorf("leaderElection = %v", le)
	}
	gotPlugins := got["profiles"].([]any)[0].(map[string]any)
	srcPlugins := src["profiles"].([]any)[0].(map[string]any)
	if gotPlugins["schedulerName"] != "draxr-scheduler" {
		t.Errorf("schedulerName = %v", gotPlugins["schedulerName"])
	}
	a, _ := json.Marshal([]any{gotPlugins["plugins"], gotPlugins["pluginConfig"]})
	b, _ := json.Marshal([]any{srcPlugins["plugins"], srcPlugins["pluginConfig"]})
	if string(a) != string(b) {
		t.Errorf("plugins differ from %s:\n%s\n%s", SchedulerConfig, a, b)
	}
	if _, err := placement.ParseProfile([]byte(data), "rendered scheduler-config.yaml", "draxr-scheduler"); err != nil {
		t.Fatalf("rendered scheduler config does not load: %v", err)
	}
	image, args := container(t, mustFind(t, docs, "Deployment", "draxr-scheduler"))
	if !strings.HasSuffix(image, "/draxr-scheduler:0.1.0") || !slices.Equal(args, []string{"--config=/etc/draxr/scheduler-config.yaml", "--v=4"}) {
		t.Errorf("scheduler image %s args %v", image, args)
	}
	// Its lease is in the release's namespace, named, and nowhere else.
	rs := rules(t, mustFind(t, docs, "Role", "draxr-scheduler"))
	if !grants(rs, "coordination.k8s.io", "leases", "draxr-scheduler", "update") || grants(rs, "coordination.k8s.io", "leases", "other", "update") {
		t.Errorf("scheduler Role = %+v", rs)
	}
}

// Parts switch off; the example driver is off by default.
func TestToggles(t *testing.T) {
	docs := render(t, nil)
	if Find(docs, "DaemonSet", "draxr-example-driver") != nil {
		t.Error("example driver rendered by default")
	}
	docs = render(t, map[string]any{"scheduler": map[string]any{"enabled": false}, "exampleDriver": map[string]any{"enabled": true, "driverName": "dev.example.org"}})
	if Find(docs, "Deployment", "draxr-scheduler") != nil || Find(docs, "ClusterRole", "draxr-scheduler") != nil {
		t.Error("scheduler rendered while disabled")
	}
	// The autoscaler still reads the scheduler's configuration.
	mustFind(t, docs, "ConfigMap", "draxr-scheduler-config")
	ds := mustFind(t, docs, "DaemonSet", "draxr-example-driver")
	if _, args := container(t, ds); !slices.Contains(args, "--driver-name=dev.example.org") {
		t.Errorf("driver args %v", args)
	}
	dc := mustFind(t, docs, "DeviceClass", "example-gpu")
	if expr, _, _ := unstructured.NestedSlice(dc.Object, "spec", "selectors"); !strings.Contains(expr[0].(map[string]any)["cel"].(map[string]any)["expression"].(string), `"dev.example.org"`) {
		t.Errorf("DeviceClass selectors = %v", expr)
	}
	docs = render(t, map[string]any{"autoscaler": map[string]any{"enabled": false}, "scheduler": map[string]any{"enabled": false}})
	for _, d := range docs {
		if d.Component() != "dashboards" {
			t.Errorf("rendered %s %s with every part off", d.Kind(), d.Name())
		}
	}
}

// Every dashboards/*.json file is in the Grafana ConfigMap under its name,
// with the sidecar's label; with no file there is no ConfigMap and the
// chart still renders.
func TestDashboards(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(Dir(root), "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, docs []Doc, want []string) {
		t.Helper()
		d := Find(docs, "ConfigMap", "draxr-dashboards")
		if len(want) == 0 {
			if d != nil {
				t.Fatalf("dashboards ConfigMap rendered with no dashboard")
			}
			return
		}
		if d == nil {
			t.Fatalf("no dashboards ConfigMap for %v", want)
		}
		if d.Object.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("labels = %v", d.Object.GetLabels())
		}
		data, _, _ := unstructured.NestedStringMap(d.Object.Object, "data")
		for _, f := range want {
			var v map[string]any
			if err := json.Unmarshal([]byte(data[filepath.Base(f)]), &v); err != nil {
				t.Errorf("%s in the ConfigMap is not the dashboard's JSON: %v", filepath.Base(f), err)
			}
		}
		if len(data) != len(want) {
			t.Errorf("ConfigMap holds %d files, want %d", len(data), len(want))
		}
	}
	t.Run("shipped", func(t *testing.T) { check(t, render(t, nil), files) })
	t.Run("added", func(t *testing.T) {
		ch, err := loader.Load(Dir(root))
		if err != nil {
			t.Fatal(err)
		}
		ch.Files = slices.DeleteFunc(ch.Files, func(f *chart.File) bool { return strings.HasPrefix(f.Name, "dashboards/") })
		ch.Files = append(ch.Files, &chart.File{Name: "dashboards/a.json", Data: []byte(`{"title": "a", "panels": []}`)},
			&chart.File{Name: "dashboards/b.json", Data: []byte("{\n  \"title\": \"b\"\n}\n")})
		docs, err := RenderChart(ch, "draxr", "kube-system", nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, docs, []string{"a.json", "b.json"})
		docs, err = RenderChart(ch, "draxr", "kube-system", map[string]any{"dashboards": map[string]any{"enabled": false}})
		if err != nil {
			t.Fatal(err)
		}
		check(t, docs, nil)
	})
}

// The plain manifests under */deploy and the chart's copy of the
// scheduler configuration are what make manifests writes;
// DRAXR_UPDATE_MANIFESTS=1 writes them.
func TestPlainManifestsUpToDate(t *testing.T) {
	want, err := PlainManifests(root)
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range want {
		full := filepath.Join(root, path)
		if os.Getenv("DRAXR_UPDATE_MANIFESTS") != "" {
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Errorf("%s is stale: run make manifests", path)
		}
	}
	// The plain RBAC is the chart's: same names the e2e tests use.
	docs, err := Render(Dir(root), PlainRelease, PlainNamespace, PlainValues())
	if err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"draxr-autoscaler", "draxr-scheduler", "draxr-example-driver"} {
		if d := Find(docs, "ServiceAccount", sa); d == nil || d.Namespace() != "kube-system" {
			t.Errorf("no ServiceAccount kube-system/%s in the plain manifests", sa)
		}
	}
}

// extraArgs dry-run: true (shadow mode) gives the autoscaler its own
// status ConfigMap and lease, and the RBAC to write exactly those, so it
// runs beside an acting autoscaler without touching its status or lease.
func TestAutoscalerDryRun(t *testing.T) {
	group := map[string]any{"apiVersion": "draxr.dev/v1alpha1", "kind": "NodeGroup", "metadata": map[string]any{"name": "gpu"},
		"spec": map[string]any{"minSize": 0, "maxSize": 3}}
	docs := render(t, map[string]any{"autoscaler": map[string]any{"cloudProvider": "local", "nodeGroups": []any{group},
		"extraArgs": map[string]any{"dry-run": true}}})
	_, args := container(t, mustFind(t, docs, "Deployment", "draxr-autoscaler"))
	for _, want := range []string{"--dry-run=true", "--status-config-map-name=draxr-autoscaler-dry-run-status",
		"--leader-elect-resource-name=draxr-autoscaler-dry-run"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
	if err := app.NewCommand().Flags().Parse(args); err != nil {
		t.Fatalf("draxr-autoscaler rejects the chart's args: %v", err)
	}
	var role []rbacv1.PolicyRule
	for _, d := range docs {
		if d.Kind() == "Role" {
			role = append(role, rules(t, d.Object)...)
		}
	}
	if !grants(role, "", "configmaps", "draxr-autoscaler-dry-run-status", "update") || grants(role, "", "configmaps", "cluster-autoscaler-status", "update") {
		t.Errorf("dry run: the Role must let it update its own status ConfigMap only: %+v", role)
	}
	if !grants(role, "coordination.k8s.io", "leases", "draxr-autoscaler-dry-run", "update") || grants(role, "coordination.k8s.io", "leases", "draxr-autoscaler", "update") {
		t.Errorf("dry run: the Role must let it hold its own lease only: %+v", role)
	}
}

// cloudProvider externalgrpc: the chart writes CA's cloud-config, which
// draxr-autoscaler reads, mounts it and the TLS Secret, and passes it.
func TestAutoscalerExternalGRPC(t *testing.T) {
	docs := render(t, map[string]any{"cloudProvider": "externalgrpc", "autoscaler": map[string]any{"externalGRPC": map[string]any{
		"address": "provider.kube-system.svc:8086", "tlsSecret": "client-tls", "grpcTimeout": "10s", "templateSlicesConfigMap": "gpu-ops/slices"}}})
	_, args := container(t, mustFind(t, docs, "Deployment", "draxr-autoscaler"))
	for _, w := range []string{"--cloud-provider=externalgrpc", "--cloud-config=/etc/draxr/externalgrpc/cloud-config.yaml"} {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %s: %v", w, args)
		}
	}
	cm := mustFind(t, docs, "ConfigMap", "draxr-autoscaler-externalgrpc")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "cloud-config.yaml")
	c, err := externalgrpc.ParseConfig([]byte(data))
	if err != nil {
		t.Fatalf("the chart's cloud-config is refused: %v\n%s", err, data)
	}
	if c.Address != "provider.kube-system.svc:8086" || c.Cert != "/etc/draxr/externalgrpc-tls/tls.crt" || c.Key != "/etc/draxr/externalgrpc-tls/tls.key" ||
		c.Cacert != "/etc/draxr/externalgrpc-tls/ca.crt" || c.Timeout() != 10*time.Second || c.TemplateSlicesConfigMap != "gpu-ops/slices" {
		t.Errorf("cloud-config %+v", c)
	}
	dep := mustFind(t, docs, "Deployment", "draxr-autoscaler")
	vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	found := false
	for _, v := range vols {
		if name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); name == "client-tls" {
			found = true
		}
	}
	if !found {
		t.Errorf("the TLS Secret client-tls is not a volume: %v", vols)
	}
	role := mustFind(t, docs, "Role", "draxr-autoscaler-externalgrpc-templates")
	if role.GetNamespace() != "gpu-ops" || !grants(rules(t, role), "", "configmaps", "slices", "get") || grants(rules(t, role), "", "configmaps", "other", "get") {
		t.Errorf("template ConfigMap Role in %s: %+v; want get on gpu-ops/slices alone", role.GetNamespace(), rules(t, role))
	}
}
