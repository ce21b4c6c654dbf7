package chart

import (
	"fmt"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"

	"draxr.dev/draxr/autoscaler/app"
)

// Every provider with every scheduler mode, acting and dry run: the chart
// renders (schema-validated), passes helm lint (strict), the autoscaler's
// flags parse, and the scheduler runs exactly when asked.
func TestMatrix(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(KubeVersion())
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]map[string]any{
		"local":      {"cloudProvider": "local", "nodeGroupsConfigMap": "groups"},
		"clusterapi": {"cloudProvider": "clusterapi", "clusterAPI": map[string]any{"autoDiscovery": []any{"clusterapi:namespace=fleet"}}},
	}
	schedulers := map[string]map[string]any{
		"off":     {},
		"beside":  {"enabled": true},
		"replace": {"enabled": true, "replaceKubeScheduler": true},
	}
	for pName, p := range providers {
		for sName, s := range schedulers {
			for _, dry := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dry-run=%v", pName, sName, dry), func(t *testing.T) {
					a := map[string]any{"extraArgs": map[string]any{"dry-run": dry}}
					for k, v := range p {
						a[k] = v
					}
					values := map[string]any{"autoscaler": a, "scheduler": s}
					docs := render(t, values)
					_, args := container(t, mustFind(t, docs, "Deployment", "draxr-autoscaler"))
					if args[0] != "--cloud-provider="+pName {
						t.Errorf("args %v", args)
					}
					if err := app.NewCommand().Flags().Parse(args); err != nil {
						t.Errorf("draxr-autoscaler rejects %v: %v", args, err)
					}
					wantLease := "draxr-autoscaler"
					if dry {
						wantLease = "draxr-autoscaler-dry-run"
					}
					if !slices.Contains(args, "--leader-elect-resource-name="+wantLease) {
						t.Errorf("args %v lack lease %s", args, wantLease)
					}
					if got := Find(docs, "Deployment", "draxr-scheduler") != nil; got != (sName != "off") {
						t.Errorf("scheduler rendered: %v", got)
					}
					l := action.NewLint()
					l.Strict, l.Namespace, l.KubeVersion = true, "kube-system", kv
					res := l.Run([]string{Dir(root)}, values)
					for _, m := range res.Messages {
						t.Logf("lint: %s", m.Error())
					}
					if len(res.Errors) > 0 || action.HasWarningsOrErrors(res) {
						t.Fatalf("helm lint: %v", res.Errors)
					}
				})
			}
		}
	}
}
