package app

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// A Cluster Autoscaler user switches by changing the image: every command
// CA's Helm chart renders for Cluster API (testdata/ca-chart-clusterapi.yaml)
// is taken by draxr-autoscaler's flag parsing, with CA's meanings.
func TestCAChartCommands(t *testing.T) {
	data, err := os.ReadFile("testdata/ca-chart-clusterapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name string `json:"name"`
		// Values are the chart values the command is rendered from.
		Values  map[string]any `json:"values"`
		Command []string       `json:"command"`
		Want    struct {
			Namespace     string `json:"namespace"`
			AutoDiscovery string `json:"autoDiscovery"`
			CloudConfig   string `json:"cloudConfig"`
			Kubeconfig    string `json:"kubeconfig"`
			Authoritative bool   `json:"authoritative"`
		} `json:"want"`
	}
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if len(tc.Command) == 0 || tc.Command[0] != "./cluster-autoscaler" {
				t.Fatalf("command %v does not start with CA's ./cluster-autoscaler", tc.Command)
			}
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addAllFlags(fs)
			compat := addCompatFlags(fs)
			// The log flags are klog's, global: CA's chart's --v=4 must not
			// outlive this case.
			for _, name := range []string{"v", "vmodule"} {
				if f := fs.Lookup(name); f != nil {
					old := f.Value.String()
					t.Cleanup(func() { _ = f.Value.Set(old) })
				}
			}
			if err := fs.Parse(tc.Command[1:]); err != nil {
				t.Fatalf("parse: %v", err)
			}
			if fs.NArg() != 0 {
				t.Fatalf("stray arguments %v", fs.Args())
			}
			warnings, err := o.check(compat, fs)
			if err != nil {
				t.Fatalf("draxr-autoscaler refuses CA's chart command: %v", err)
			}
			for _, w := range warnings {
				// Only the logging flags CA's chart always passes may warn.
				if !strings.HasPrefix(w, "--logtostderr ") && !strings.HasPrefix(w, "--stderrthreshold ") {
					t.Errorf("unexpected warning %q", w)
				}
			}
			w := tc.Want
			if o.cloudProvider != "clusterapi" || o.namespace != w.Namespace || strings.Join(o.nodeGroupAutoDiscovery, ";") != w.AutoDiscovery ||
				o.cloudConfig != w.CloudConfig || o.kubeconfig != w.Kubeconfig || o.cloudConfigAuthoritative != w.Authoritative {
				t.Errorf("options: provider %s, namespace %s, discovery %v, cloud-config %q, kubeconfig %q, authoritative %v; want %+v",
					o.cloudProvider, o.namespace, o.nodeGroupAutoDiscovery, o.cloudConfig, o.kubeconfig, o.cloudConfigAuthoritative, w)
			}
		})
	}
}
