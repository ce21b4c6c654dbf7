package app

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"draxr.dev/draxr/autoscaler/liveview"
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
		{[]string{"--cloud-provider=clusterapi", "--cloud-config=mgmt.kubeconfig", "--kubeconfig=workload.kubeconfig"}, ""},
		{[]string{"--cloud-provider=clusterapi", "--clusterapi-cloud-config-authoritative", "--kubeconfig=workload.kubeconfig"}, ""},
		{[]string{"--node-group-config=g.yaml", "--cloud-config=mgmt.kubeconfig"}, "--cloud-config and --clusterapi-cloud-config-authoritative need --cloud-provider=clusterapi"},
		{[]string{"--cloud-provider=externalgrpc", "--cloud-config=cloud.yaml"}, ""},
		{[]string{"--cloud-provider=externalgrpc"}, "--cloud-config is required with --cloud-provider=externalgrpc"},
		{[]string{"--cloud-provider=externalgrpc", "--cloud-config=cloud.yaml", "--node-group-config=g.yaml"}, "--node-group-config is for the local provider"},
		{[]string{"--cloud-provider=externalgrpc", "--cloud-config=cloud.yaml", "--node-group-auto-discovery=clusterapi:"}, "give it to the externalgrpc provider service instead"},
		{[]string{"--cloud-provider=externalgrpc", "--cloud-config=cloud.yaml", "--clusterapi-cloud-config-authoritative"}, "--clusterapi-cloud-config-authoritative needs --cloud-provider=clusterapi"},
		{[]string{"--cloud-provider=kwok"}, ""},
		{[]string{"--cloud-provider=kwok", "--node-group-config=g.yaml"}, "the kwok provider reads node groups from its ConfigMap kwok-provider-config"},
		{[]string{"--cloud-provider=kwok", "--cloud-config=mgmt.kubeconfig"}, "--cloud-config and --clusterapi-cloud-config-authoritative need --cloud-provider=clusterapi"},
		{[]string{"--cloud-provider=kwok", "--node-group-auto-discovery=clusterapi:"}, "--node-group-auto-discovery needs --cloud-provider=clusterapi"},
		{[]string{"--cloud-provider=gce"}, `--cloud-provider "gce" is not supported (supported: local, kwok, clusterapi, externalgrpc)`},
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

// The management cluster is chosen as CA chooses it, for each of the
// topologies its clusterapi docs list.
func TestManagementCluster(t *testing.T) {
	dir := t.TempDir()
	mgmt := filepath.Join(dir, "mgmt.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["m"] = &clientcmdapi.Cluster{Server: "https://management.example:6443"}
	cfg.AuthInfos["m"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "m"}
	cfg.CurrentContext = "m"
	if err := clientcmd.WriteToFile(*cfg, mgmt); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	workloadCfg := &rest.Config{Host: "https://workload.example:6443"}
	workload := kubefake.NewClientset()
	tests := []struct {
		name     string
		args     []string
		wantHost string
		wantErr  string
	}{
		{name: "one cluster", args: nil, wantHost: workloadCfg.Host},
		{name: "management by --cloud-config, workload by --kubeconfig or in-cluster", args: []string{"--cloud-config=" + mgmt}, wantHost: "https://management.example:6443"},
		{name: "authoritative --cloud-config", args: []string{"--cloud-config=" + mgmt, "--clusterapi-cloud-config-authoritative"}, wantHost: "https://management.example:6443"},
		{name: "management in-cluster, workload by --kubeconfig", args: []string{"--clusterapi-cloud-config-authoritative"},
			wantErr: "management cluster (in-cluster, --clusterapi-cloud-config-authoritative without --cloud-config)"},
		{name: "missing file", args: []string{"--cloud-config=" + filepath.Join(dir, "nope")}, wantErr: "management cluster (--cloud-config=" + filepath.Join(dir, "nope")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(append([]string{"--cloud-provider=clusterapi"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			got, client, err := managementCluster(o, workloadCfg, workload)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tc.wantHost {
				t.Errorf("management cluster %s, want %s", got.Host, tc.wantHost)
			}
			if same := client == kubernetes.Interface(workload); same != (tc.wantHost == workloadCfg.Host) {
				t.Errorf("management client is the workload's: %v", same)
			}
		})
	}
}

// With --cloud-provider=externalgrpc, --cloud-config is CA's YAML for the
// provider service; a bad one stops the start naming the file and field.
func TestExternalGRPCCloudConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, wantErr string
	}{
		{name: "CA's plaintext config", path: write("ok.yaml", "address: 127.0.0.1:8086\ngrpc_timeout: 3s\n")},
		{name: "missing file", path: filepath.Join(dir, "nope.yaml"), wantErr: "externalgrpc provider: --cloud-config: open " + filepath.Join(dir, "nope.yaml")},
		{name: "kubeconfig given by mistake", path: write("kubeconfig", "apiVersion: v1\nkind: Config\n"),
			wantErr: "--cloud-config " + filepath.Join(dir, "kubeconfig") + `: not an externalgrpc cloud-config: unknown field "apiVersion"`},
		{name: "missing TLS files", path: write("tls.yaml", "address: a:1\ncert: /nonexistent/c\nkey: /nonexistent/k\ncacert: /nonexistent/ca\n"),
			wantErr: "externalgrpc provider: cert /nonexistent/c and key /nonexistent/k"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{cloudProvider: "externalgrpc", cloudConfig: tc.path}
			client := kubefake.NewClientset()
			p, err := newProvider(context.Background(), o, &rest.Config{}, client, nil, liveview.FromInformers(informers.NewSharedInformerFactory(client, 0)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || p == nil {
				t.Fatalf("provider %v, %v", p, err)
			}
		})
	}
}
