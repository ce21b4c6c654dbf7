package chart

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"draxr.dev/draxr/autoscaler/app"
)

// CA's chart values for Cluster API mean the same here: cloudProvider,
// autoDiscovery's clusterName, namespace and labels, and clusterAPIMode
// with its kubeconfig paths and Secret become the flags CA's chart
// passes, which draxr-autoscaler parses.
func TestClusterAPIModes(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		want    []string
		notWant []string
	}{
		{"incluster-incluster", []string{"--namespace=autoscaling"}, []string{"--kubeconfig", "--cloud-config"}},
		{"incluster-kubeconfig", []string{"--cloud-config=/etc/kubernetes/mgmt-kubeconfig", "--namespace=autoscaling"}, []string{"--kubeconfig"}},
		{"kubeconfig-incluster", []string{"--kubeconfig=/etc/kubernetes/value", "--clusterapi-cloud-config-authoritative", "--namespace=kube-system"},
			[]string{"--cloud-config"}},
		{"kubeconfig-kubeconfig", []string{"--kubeconfig=/etc/kubernetes/value", "--cloud-config=/etc/kubernetes/mgmt-kubeconfig"}, nil},
		{"single-kubeconfig", []string{"--kubeconfig=/etc/kubernetes/value"}, []string{"--cloud-config"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			docs := render(t, map[string]any{
				"cloudProvider":              "clusterapi",
				"clusterAPIMode":             tc.mode,
				"clusterAPIKubeconfigSecret": "prod-kubeconfig",
				"autoDiscovery": map[string]any{"clusterName": "prod", "namespace": "fleet",
					"labels": []any{map[string]any{"color": "green"}, map[string]any{"shape": "circle"}}},
			})
			dep := mustFind(t, docs, "Deployment", "draxr-autoscaler")
			_, args := container(t, dep)
			want := append([]string{"--cloud-provider=clusterapi",
				"--node-group-auto-discovery=clusterapi:clusterName=prod,namespace=fleet,color=green,shape=circle"}, tc.want...)
			for _, w := range want {
				if !slices.Contains(args, w) {
					t.Errorf("args lack %s: %v", w, args)
				}
			}
			for _, a := range args {
				for _, nw := range tc.notWant {
					if strings.HasPrefix(a, nw) {
						t.Errorf("args have %s", a)
					}
				}
			}
			if err := app.NewCommand().Flags().Parse(args); err != nil {
				t.Fatalf("draxr-autoscaler rejects the chart's args %v: %v", args, err)
			}
			// The Secret is mounted where the workload kubeconfig path points.
			mounts, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			var found bool
			for _, m := range mounts[0].(map[string]any)["volumeMounts"].([]any) {
				if m.(map[string]any)["mountPath"] == "/etc/kubernetes" {
					found = true
				}
			}
			if !found {
				t.Errorf("clusterAPIKubeconfigSecret not mounted at /etc/kubernetes: %v", mounts)
			}
		})
	}
}

// --kubeconfig and --cloud-config are the user's to pass when no mode
// sets them (CA's chart passes them too).
func TestKubeconfigExtraArgs(t *testing.T) {
	_, args := container(t, mustFind(t, render(t, map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{
		"kubeconfig": "/k/workload", "cloud-config": "/k/mgmt"}}}), "Deployment", "draxr-autoscaler"))
	for _, w := range []string{"--kubeconfig=/k/workload", "--cloud-config=/k/mgmt"} {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %s: %v", w, args)
		}
	}
	if err := app.NewCommand().Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
}

// CA's names that cannot mean anything here fail with a message.
func TestCAValuesRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"providers disagree": {map[string]any{"cloudProvider": "clusterapi", "autoscaler": map[string]any{"cloudProvider": "local"}},
			`cloudProvider "clusterapi" (the Cluster Autoscaler chart's name) and autoscaler.cloudProvider "local" disagree`},
		"autoDiscovery with local": {map[string]any{"cloudProvider": "local", "autoDiscovery": map[string]any{"clusterName": "prod"},
			"autoscaler": map[string]any{"nodeGroupsConfigMap": "g"}}, "autoDiscovery (the Cluster Autoscaler chart's values) finds Cluster API node groups"},
		"mode with local": {map[string]any{"cloudProvider": "local", "clusterAPIMode": "single-kubeconfig",
			"autoscaler": map[string]any{"nodeGroupsConfigMap": "g"}}, "clusterAPIMode: single-kubeconfig needs cloudProvider clusterapi"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Dir(root), "draxr", "kube-system", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
