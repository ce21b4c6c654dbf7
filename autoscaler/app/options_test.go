package app

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/simulator/taints"
)

func TestFlagValidation(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" means valid
	}{
		{[]string{"--node-group-config=g.yaml"}, ""},
		{nil, "--node-group-config is required"},
		{[]string{"--node-group-config=g.yaml", "--scan-interval=0s"}, "--scan-interval must be positive"},
		{[]string{"--node-group-config=g.yaml", "--max-nodes-total=-1"}, "--max-nodes-total must be >= 0"},
		{[]string{"--node-group-config=g.yaml", "--scale-down-utilization-threshold=1.5"}, "within [0, 1]"},
		{[]string{"--node-group-config=g.yaml", "--cloud-provider=aws"}, `--cloud-provider "aws" is not supported`},
		{[]string{"--cloud-provider=clusterapi"}, ""},
		{[]string{"--cloud-provider=clusterapi", "--node-group-auto-discovery=clusterapi:namespace=a,clusterName=b", "--node-group-auto-discovery=clusterapi:tier=gpu"}, ""},
		{[]string{"--cloud-provider=clusterapi", "--node-group-auto-discovery=asg:tag=x"}, `unsupported discoverer "asg"`},
		{[]string{"--cloud-provider=clusterapi", "--node-group-auto-discovery=clusterapi:namespace"}, `invalid key=value pair "namespace"`},
		{[]string{"--cloud-provider=clusterapi", "--node-group-config=g.yaml"}, "--node-group-config is for the local provider"},
		{[]string{"--node-group-config=g.yaml", "--node-group-auto-discovery=clusterapi:"}, "--node-group-auto-discovery needs --cloud-provider=clusterapi"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validate() = %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// CA's taint flags, repeated as CA takes them, make one taint
// configuration; --ignore-taint adds startup taints as in CA.
func TestTaintFlags(t *testing.T) {
	o := &options{}
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--node-group-config=g.yaml",
		"--startup-taint=node.cilium.io/agent-not-ready", "--startup-taint=example.com/a,b", "--ignore-taint=example.com/old",
		"--startup-taint-prefix=example.com/booting-", "--status-taint=example.com/degraded"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	got := o.caOptions.taints()
	want := taints.Config{StartupTaints: []string{"node.cilium.io/agent-not-ready", "example.com/a,b", "example.com/old"},
		StartupTaintPrefixes: []string{"example.com/booting-"}, StatusTaints: []string{"example.com/degraded"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("taints = %+v, want %+v", got, want)
	}
	o = &options{}
	fs = pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--node-group-config=g.yaml", "--status-taint="}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--status-taint: an empty taint key") {
		t.Errorf("validate() = %v, want the empty --status-taint key named", err)
	}
}
