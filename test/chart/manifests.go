package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The plain manifests under */deploy are the chart rendered with these
// values as release "draxr" in kube-system: the chart is their one source
// (RBAC included); make manifests writes them and a test fails when they
// are stale. The scheduler's configuration goes the other way: its source
// is scheduler/deploy/scheduler-config.yaml (the planner, the autoscaler
// and the tests read it), and the chart carries a copy.
const (
	PlainRelease   = "draxr"
	PlainNamespace = "kube-system"
	// SchedulerConfig is the source of the chart's files/scheduler-config.yaml.
	SchedulerConfig = "scheduler/deploy/scheduler-config.yaml"
	chartSchedConf  = "charts/draxr/files/scheduler-config.yaml"
)

// PlainValues are the values the plain manifests are rendered with: every
// part on, draxr-scheduler replacing kube-scheduler, the local provider
// with RBAC for every cloud provider, node groups from a ConfigMap the
// user writes.
func PlainValues() map[string]any {
	return map[string]any{
		"autoscaler": map[string]any{
			"cloudProvider":       "local",
			"rbac":                map[string]any{"allProviders": true},
			"nodeGroupsConfigMap": "draxr-node-groups",
			"service":             map[string]any{"enabled": false},
		},
		// scheduler/deploy/deployment.yaml replaces kube-scheduler: the
		// cut-over is explicit, as the chart asks.
		"scheduler":     map[string]any{"enabled": true, "replaceKubeScheduler": true},
		"exampleDriver": map[string]any{"enabled": true},
		"dashboards":    map[string]any{"enabled": false},
	}
}

// plainFile is one plain manifest: the objects of a component, by kind.
type plainFile struct {
	path      string
	component string
	kinds     []string
	about     string
}

func plainFiles() []plainFile {
	rbacKinds := []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	return []plainFile{
		{"autoscaler/deploy/rbac.yaml", "autoscaler", rbacKinds, "draxr-autoscaler's ServiceAccount and RBAC (every cloud provider: local, kwok, clusterapi)"},
		{"autoscaler/deploy/deployment.yaml", "autoscaler", []string{"Deployment", "PodDisruptionBudget"},
			"draxr-autoscaler with the local provider; put your NodeGroup objects in the ConfigMap draxr-node-groups"},
		{"scheduler/deploy/rbac.yaml", "scheduler", rbacKinds, "draxr-scheduler's ServiceAccount and RBAC"},
		{"scheduler/deploy/deployment.yaml", "scheduler", []string{"ConfigMap", "Deployment", "PodDisruptionBudget"},
			"draxr-scheduler replacing kube-scheduler (profile default-scheduler, kube-scheduler's lease kube-system/kube-scheduler: stop kube-scheduler as docs/chart.md says), and its configuration"},
		{"kubelet/deploy/rbac.yaml", "example-driver", rbacKinds, "draxr-example-driver's ServiceAccount and RBAC"},
		{"kubelet/deploy/daemonset.yaml", "example-driver", []string{"ConfigMap", "DaemonSet"},
			"draxr-example-driver on the nodes labelled draxr.dev/example-driver=true, with its device inventory"},
		{"kubelet/deploy/deviceclass.yaml", "example-driver", []string{"DeviceClass"}, "the example driver's DeviceClass (example.com/gpu)"},
	}
}

// helmOnlyLabel matches the label lines that only make sense in a Helm
// release.
var helmOnlyLabel = regexp.MustCompile(`(?m)^\s*(helm\.sh/chart|app\.kubernetes\.io/managed-by): .*\n`)

// PlainManifests renders the plain manifests, keyed by path under the
// repository root, the chart's copy of the scheduler configuration
// included.
func PlainManifests(root string) (map[string]string, error) {
	docs, err := Render(Dir(root), PlainRelease, PlainNamespace, PlainValues())
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	used := make([]bool, len(docs))
	for _, f := range plainFiles() {
		var b strings.Builder
		fmt.Fprintf(&b, "# %s.\n# Generated from charts/draxr by `make manifests` (release %s in %s):\n# edit the chart, not this file; `helm install` is the way to set values.\n",
			f.about, PlainRelease, PlainNamespace)
		n := 0
		for _, kind := range f.kinds {
			for i, d := range docs {
				if d.Component() != f.component || d.Kind() != kind {
					continue
				}
				if n > 0 {
					b.WriteString("---\n")
				}
				b.WriteString(helmOnlyLabel.ReplaceAllString(d.Text, ""))
				used[i] = true
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: the chart rendered no %v of %s", f.path, f.kinds, f.component)
		}
		out[f.path] = b.String()
	}
	for i, d := range docs {
		if !used[i] {
			return nil, fmt.Errorf("%s %s (%s) goes to no plain manifest", d.Kind(), d.Name(), d.Template)
		}
	}
	conf, err := os.ReadFile(filepath.Join(root, SchedulerConfig))
	if err != nil {
		return nil, err
	}
	out[chartSchedConf] = string(conf)
	return out, nil
}
