package chart

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/placement"
)

// schedulerConfig is the rendered KubeSchedulerConfiguration: its text
// and its leaderElection section.
func schedulerConfig(t *testing.T, docs []Doc) (data string, le map[string]any) {
	t.Helper()
	cm := mustFind(t, docs, "ConfigMap", "draxr-scheduler-config")
	data, _, _ = unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	le, _ = cfg["leaderElection"].(map[string]any)
	return data, le
}

// The three ways draxr-scheduler runs. Off (the default): no scheduler,
// and the autoscaler simulates default-scheduler, the pods kube-scheduler
// places. Beside kube-scheduler: its own name and lease. Replacing it:
// default-scheduler and kube-scheduler's lease, so only one is active;
// the Role for that lease is in kube-system whatever the release's
// namespace.
func TestSchedulerModes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		values     map[string]any
		scheduler  bool
		profile    string
		leaseNS    string
		lease      string
		notesWants string
	}{
		{"off", nil, false, "default-scheduler", "", "", "draxr-scheduler is off"},
		{"beside", map[string]any{"enabled": true}, true, "draxr-scheduler", "autoscaling", "draxr-scheduler",
			"pods of default-scheduler are not planned for"},
		{"beside, named", map[string]any{"enabled": true, "schedulerName": "gpu-scheduler"}, true, "gpu-scheduler", "autoscaling", "draxr-scheduler",
			"spec.schedulerName gpu-scheduler"},
		{"replace", map[string]any{"enabled": true, "replaceKubeScheduler": true}, true, "default-scheduler", "kube-system", "kube-scheduler",
			"mv /etc/kubernetes/manifests/kube-scheduler.yaml"},
		{"replace, named default", map[string]any{"enabled": true, "replaceKubeScheduler": true, "schedulerName": "default-scheduler"}, true,
			"default-scheduler", "kube-system", "kube-scheduler", "kube-system/kube-scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A null scheduler value would drop scheduler's defaults.
			values := map[string]any{"scheduler": map[string]any{}}
			if tc.values != nil {
				values["scheduler"] = tc.values
			}
			docs := render(t, values)
			if got := Find(docs, "Deployment", "draxr-scheduler") != nil; got != tc.scheduler {
				t.Fatalf("scheduler Deployment rendered: %v, want %v", got, tc.scheduler)
			}
			data, le := schedulerConfig(t, docs)
			// What the autoscaler and the scheduler load (the first profile).
			p, err := placement.ParseProfile([]byte(data), "rendered", "")
			if err != nil {
				t.Fatal(err)
			}
			if p.SchedulerName != tc.profile {
				t.Errorf("profile = %s, want %s", p.SchedulerName, tc.profile)
			}
			notes, err := Notes(Dir(root), "draxr", "autoscaling", values)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(notes, tc.notesWants) {
				t.Errorf("NOTES lack %q:\n%s", tc.notesWants, notes)
			}
			if !tc.scheduler {
				if Find(docs, "Role", "draxr-scheduler") != nil || Find(docs, "PodDisruptionBudget", "draxr-scheduler") != nil {
					t.Error("scheduler objects rendered while it is off")
				}
				return
			}
			if le["resourceNamespace"] != tc.leaseNS || le["resourceName"] != tc.lease || le["resourceLock"] != "leases" {
				t.Errorf("leaderElection = %v, want leases %s/%s", le, tc.leaseNS, tc.lease)
			}
			role := Find(docs, "Role", "draxr-scheduler")
			if role == nil || role.Namespace() != tc.leaseNS {
				t.Fatalf("scheduler lease Role not in %s: %+v", tc.leaseNS, role)
			}
			rs := rules(t, role.Object)
			if !grants(rs, "coordination.k8s.io", "leases", tc.lease, "update") || grants(rs, "coordination.k8s.io", "leases", "other", "update") {
				t.Errorf("lease Role = %+v, want update of %s only", rs, tc.lease)
			}
			rb := Find(docs, "RoleBinding", "draxr-scheduler")
			if rb == nil || rb.Namespace() != tc.leaseNS {
				t.Errorf("lease RoleBinding not in %s", tc.leaseNS)
			}
		})
	}
}

// A second default-scheduler is never rendered by accident, nor a
// cut-over that leaves no scheduler, nor flags that move the lease.
func TestSchedulerRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"default-scheduler without cut-over": {map[string]any{"enabled": true, "schedulerName": "default-scheduler"},
			"scheduler.schedulerName: default-scheduler is kube-scheduler's name"},
		"cut-over under another name": {map[string]any{"enabled": true, "replaceKubeScheduler": true, "schedulerName": "x"},
			`scheduler.replaceKubeScheduler: true takes over kube-scheduler's pods (default-scheduler), not "x"`},
		"cut-over, scheduler off": {map[string]any{"replaceKubeScheduler": true},
			"would leave the cluster without a scheduler"},
		"lease flag": {map[string]any{"enabled": true, "extraArgs": []any{"--leader-elect-resource-name=x"}},
			"scheduler.extraArgs: --leader-elect-resource-name=x would move draxr-scheduler off the lease"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Dir(root), "draxr", "kube-system", map[string]any{"scheduler": tc.values})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// PodDisruptionBudgets as CA's chart has them (maxUnavailable 1 by
// default, minAvailable instead, none when null), and the scheduler's
// replicas prefer different nodes unless affinity is set.
func TestDisruption(t *testing.T) {
	pdb := func(t *testing.T, docs []Doc, name string) map[string]any {
		t.Helper()
		d := Find(docs, "PodDisruptionBudget", name)
		if d == nil {
			return nil
		}
		spec, _, _ := unstructured.NestedMap(d.Object.Object, "spec")
		sel, _, _ := unstructured.NestedStringMap(spec, "selector", "matchLabels")
		if sel["app.kubernetes.io/name"] != name || sel["app.kubernetes.io/instance"] != "draxr" {
			t.Errorf("%s PDB selects %v", name, sel)
		}
		delete(spec, "selector")
		return spec
	}
	docs := render(t, map[string]any{"scheduler": map[string]any{"enabled": true}})
	for _, name := range []string{"draxr-autoscaler", "draxr-scheduler"} {
		if got := fmt.Sprint(pdb(t, docs, name)); got != "map[maxUnavailable:1]" {
			t.Errorf("%s PDB spec = %s, want maxUnavailable 1", name, got)
		}
	}
	terms, _, _ := unstructured.NestedSlice(mustFind(t, docs, "Deployment", "draxr-scheduler").Object,
		"spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	if len(terms) != 1 {
		t.Fatalf("scheduler anti-affinity terms = %v", terms)
	}
	term := terms[0].(map[string]any)["podAffinityTerm"].(map[string]any)
	if term["topologyKey"] != "kubernetes.io/hostname" ||
		fmt.Sprint(term["labelSelector"]) != "map[matchLabels:map[app.kubernetes.io/instance:draxr app.kubernetes.io/name:draxr-scheduler]]" {
		t.Errorf("scheduler anti-affinity term = %v", term)
	}

	docs = render(t, map[string]any{
		"autoscaler": map[string]any{"podDisruptionBudget": nil},
		"scheduler": map[string]any{"enabled": true, "podDisruptionBudget": map[string]any{"maxUnavailable": nil, "minAvailable": 1},
			"affinity": map[string]any{"nodeAffinity": map[string]any{}}},
	})
	if got := pdb(t, docs, "draxr-autoscaler"); got != nil {
		t.Errorf("autoscaler PDB rendered with podDisruptionBudget null: %v", got)
	}
	if got := fmt.Sprint(pdb(t, docs, "draxr-scheduler")); got != "map[minAvailable:1]" {
		t.Errorf("scheduler PDB spec = %s, want minAvailable 1", got)
	}
	aff, _, _ := unstructured.NestedMap(mustFind(t, docs, "Deployment", "draxr-scheduler").Object, "spec", "template", "spec", "affinity")
	if _, ok := aff["podAntiAffinity"]; ok || aff["nodeAffinity"] == nil {
		t.Errorf("scheduler.affinity does not replace the default: %v", aff)
	}

	_, err := Render(Dir(root), "draxr", "kube-system", map[string]any{"autoscaler": map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": 1}}})
	if want := "autoscaler.podDisruptionBudget: set minAvailable or maxUnavailable, not both"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// The default install runs the clusterapi provider (no required value);
// local without node groups fails at render time instead of
// crash-looping on "--node-group-config is required".
func TestAutoscalerProviderDefault(t *testing.T) {
	_, args := container(t, mustFind(t, render(t, nil), "Deployment", "draxr-autoscaler"))
	if args[0] != "--cloud-provider=clusterapi" {
		t.Errorf("default args %v, want --cloud-provider=clusterapi first", args)
	}
	_, err := Render(Dir(root), "draxr", "kube-system", map[string]any{"autoscaler": map[string]any{"cloudProvider": "local"}})
	if want := "autoscaler.cloudProvider local needs node groups: set autoscaler.nodeGroups"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// Scoring weights per resource name come from scheduler.scoring: the
// scheduler and the autoscaler's simulation load them.
func TestSchedulerScoring(t *testing.T) {
	docs := render(t, map[string]any{"scheduler": map[string]any{"scoring": map[string]any{"resources": []any{
		map[string]any{"name": "cpu", "weight": 2}, map[string]any{"name": "nvidia.com/gpu", "weight": 5},
	}}}})
	data, _ := schedulerConfig(t, docs)
	p, err := placement.ParseProfile([]byte(data), "rendered", "")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, pc := range p.PluginConfig {
		if pc.Name == "DraxrNodeResourcesFit" {
			// draxr's plugin args reach the plugin as JSON.
			if u, ok := pc.Args.(*runtime.Unknown); ok {
				got = string(u.Raw)
			}
		}
	}
	if !strings.Contains(got, `"resources":[{"name":"cpu","weight":2},{"name":"nvidia.com/gpu","weight":5}]`) {
		t.Errorf("DraxrNodeResourcesFit args = %s, want cpu 2 and nvidia.com/gpu 5 only", got)
	}
}
