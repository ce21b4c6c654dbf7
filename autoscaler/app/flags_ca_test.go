package app

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
)

// Every CA flag is either registered (supported) or in the table, never
// both and never neither; the table names only CA flags, once each.
func TestEveryCAFlagIsHandled(t *testing.T) {
	fs := registeredFlags()
	ca := map[string]bool{}
	for _, f := range caFlags() {
		if ca[f.name] {
			t.Errorf("CA flag --%s is listed twice in caFlags", f.name)
		}
		ca[f.name] = true
	}
	table := map[string]bool{}
	for _, e := range compatTable() {
		switch {
		case table[e.name]:
			t.Errorf("--%s is in the compatibility table twice", e.name)
		case !ca[e.name]:
			t.Errorf("--%s is in the compatibility table but is no Cluster Autoscaler flag", e.name)
		case fs.Lookup(e.name) != nil:
			t.Errorf("--%s is registered by draxr-autoscaler and also in the compatibility table: delete its table entry", e.name)
		case e.why == "":
			t.Errorf("--%s: the table entry says no why", e.name)
		case e.action != warn && e.action != reject:
			t.Errorf("--%s: action %q is neither warn nor reject", e.name, e.action)
		case e.action == warn && e.accept != "":
			t.Errorf("--%s: accept is for reject entries only", e.name)
		}
		table[e.name] = true
	}
	for _, f := range caFlags() {
		if fs.Lookup(f.name) == nil && !table[f.name] {
			t.Errorf("CA flag --%s is neither registered nor in the compatibility table (warn or reject it, with why)", f.name)
		}
	}
}

// A registered CA flag has CA's default, except the few listed on purpose.
func TestRegisteredCAFlagsHaveCADefaults(t *testing.T) {
	fs := registeredFlags()
	diffs := defaultDifferences()
	for _, f := range caFlags() {
		rf := fs.Lookup(f.name)
		if rf == nil {
			continue
		}
		same := sameValue(f.kind, rf.DefValue, f.def) || (f.def == "[]" && rf.DefValue == "[]")
		_, deliberate := diffs[f.name]
		switch {
		case !same && !deliberate:
			t.Errorf("--%s default %q, CA's is %q", f.name, rf.DefValue, f.def)
		case same && deliberate:
			t.Errorf("--%s has CA's default %q: delete it from defaultDifferences", f.name, f.def)
		}
	}
	for name := range diffs {
		if fs.Lookup(name) == nil {
			t.Errorf("defaultDifferences names --%s, which draxr-autoscaler does not register", name)
		}
	}
}

// docs/flags.md is what the code generates.
func TestFlagDocs(t *testing.T) {
	const path = "../../docs/flags.md"
	want := flagReference()
	if os.Getenv("DRAXR_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/flags.md is stale (%v): regenerate it with DRAXR_UPDATE_DOCS=1 go test ./autoscaler/app -run TestFlagDocs", err)
	}
	for _, line := range []string{
		"| `--address` | `:8085` |",
		"| `--regional` | `false` | warns | GCE/GKE only |",
		"| `--nodes` | `[]` | rejected |",
		"| `--scale-up-from-zero` | `true` | rejected unless `true` |",
		"| `--leader-elect-resource-name` | `cluster-autoscaler` | supported | default `draxr-autoscaler`: draxr's own lease",
	} {
		if !strings.Contains(want, line) {
			t.Errorf("docs/flags.md lacks %q", line)
		}
	}
}

func parseCompat(t *testing.T, args ...string) ([]string, error) {
	t.Helper()
	o := &options{}
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	o.addAllFlags(fs)
	c := addCompatFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return c.check()
}

func TestCompatFlagsWarnOrReject(t *testing.T) {
	tests := []struct {
		args     []string
		warnings []string
		err      string
	}{
		{args: nil},
		{args: []string{"--regional"}, warnings: []string{"--regional has no effect in draxr-autoscaler: GCE/GKE only"}},
		{args: []string{"--gce-concurrent-refreshes=3", "--node-deletion-batcher-interval=1s"}, warnings: []string{
			"--node-deletion-batcher-interval has no effect in draxr-autoscaler: draxr deletes each node as soon as it is drained",
			"--gce-concurrent-refreshes has no effect in draxr-autoscaler: GCE/GKE only"}},
		{args: []string{"--drain-priority-config=p.yaml"}, err: "--drain-priority-config=p.yaml is not supported by draxr-autoscaler: draxr evicts a node's pods together"},
		{args: []string{"--scale-up-from-zero=true"}, warnings: []string{"--scale-up-from-zero has no effect in draxr-autoscaler: draxr always scales up when no node is ready"}},
		{args: []string{"--scale-up-from-zero=false"}, err: "--scale-up-from-zero=false is not supported by draxr-autoscaler: draxr always scales up when no node is ready"},
		{args: []string{"--unready-nodes-scope=autoscaled"}, err: "--unready-nodes-scope=autoscaled is not supported"},
		{args: []string{"--leader-elect-resource-namespace=other"}, warnings: []string{"--leader-elect-resource-namespace has no effect in draxr-autoscaler: ignored, as in CA: the lease lives in --namespace"}},
		// The Cluster Autoscaler chart's logging flags.
		{args: []string{"--logtostderr=true", "--stderrthreshold=info", "--v=4"}, warnings: []string{
			"--logtostderr has no effect in draxr-autoscaler: draxr-autoscaler logs every message to stderr",
			"--stderrthreshold has no effect in draxr-autoscaler"}},
		{args: []string{"--logtostderr=false", "--log-dir=/var/log"}, err: "--logtostderr=false is not supported by draxr-autoscaler",
			warnings: []string{"--log_dir has no effect in draxr-autoscaler"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			warnings, err := parseCompat(t, tc.args...)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("check() error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("check() error %v, want %q", err, tc.err)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %q", warnings, tc.warnings)
			}
			for _, w := range tc.warnings {
				found := false
				for _, got := range warnings {
					found = found || strings.HasPrefix(got, w)
				}
				if !found {
					t.Errorf("warnings %q lack %q", warnings, w)
				}
			}
		})
	}
}

// A warned flag still parses its value as CA does: a typo is an error.
func TestCompatFlagValueIsParsed(t *testing.T) {
	o := &options{}
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	o.addAllFlags(fs)
	addCompatFlags(fs)
	for _, arg := range []string{"--regional=maybe", "--node-deletion-batcher-interval=3", "--pod-injection-limit=many"} {
		if err := fs.Parse([]string{arg}); err == nil {
			t.Errorf("%s parsed, want an error", arg)
		}
	}
	if err := fs.Parse([]string{"--log_dir=/tmp", "--log-file-max-size=10", "--stderrthreshold=info", "--v=3"}); err != nil {
		t.Errorf("klog's flags, with either word separator: %v", err)
	}
}

func TestCAOptionsValidation(t *testing.T) {
	base := []string{"--node-group-config=g.yaml"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--leader-elect-resource-lock=leases"}, ""},
		{[]string{"--leader-elect-resource-lock=endpoints"}, `--leader-elect-resource-lock "endpoints" is not supported: draxr-autoscaler locks with a Lease ("leases")`},
		{[]string{"--kube-api-content-type=application/yaml"}, `--kube-api-content-type "application/yaml" is not supported`},
		{[]string{"--kube-client-qps=0"}, "--kube-client-qps and --kube-client-burst must be > 0"},
		{[]string{"--estimator=oldbinpacking"}, `--estimator "oldbinpacking" is not supported`},
		{[]string{"--enable-dynamic-resource-allocation=false"}, "--enable-dynamic-resource-allocation=false is not supported"},
		{[]string{"--new-pod-scale-up-delay=-1s"}, "--new-pod-scale-up-delay must be >= 0"},
		{[]string{"--node-info-cache-expire-time=-1h"}, "--node-info-cache-expire-time must be >= 0"},
		{[]string{"--node-info-cache-expire-time=0"}, ""},
		{[]string{"--ignore-daemonsets-utilization", "--ignore-mirror-pods-utilization=true"}, ""},
		{[]string{"--bypassed-scheduler-names=a,,b"}, "a name is empty"},
		{[]string{"--scheduler-config-file=s.yaml", "--bypassed-scheduler-names=gpu-scheduler", "--expendable-pods-priority-cutoff=0"}, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addAllFlags(fs)
			if err := fs.Parse(append(append([]string(nil), base...), tc.args...)); err != nil {
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

// The client flags reach the API client's configuration: CA's defaults,
// and what the flags say.
func TestClientFlagsApplyToRestConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := dir + "/kubeconfig"
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args                []string
		qps                 float32
		burst               int
		contentType, server string
	}{
		{nil, 5, 10, runtime.ContentTypeProtobuf, "https://127.0.0.1:1"},
		{[]string{"--kube-client-qps=20", "--kube-client-burst=40", "--kube-api-content-type=application/json", "--kubernetes=https://127.0.0.1:2"},
			20, 40, runtime.ContentTypeJSON, "https://127.0.0.1:2"},
	} {
		o := &options{}
		fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
		o.addAllFlags(fs)
		if err := fs.Parse(append([]string{"--kubeconfig=" + kubeconfig}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := newClient(o)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst || cfg.ContentType != tc.contentType || cfg.Host != tc.server || cfg.UserAgent != "draxr-autoscaler" {
			t.Errorf("%v: rest config QPS %v burst %d content type %q host %q user agent %q, want %v %d %q %q draxr-autoscaler",
				tc.args, cfg.QPS, cfg.Burst, cfg.ContentType, cfg.Host, cfg.UserAgent, tc.qps, tc.burst, tc.contentType, tc.server)
		}
	}
}

// --feature-gates reaches the process's gates as in draxr simulate; an
// unknown gate is a start-up error naming it.
func TestFeatureGatesFlag(t *testing.T) {
	cmd := NewCommand()
	cmd.SetArgs([]string{"--node-group-config=g.yaml", "--feature-gates=NoSuchGate=true"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `--feature-gates: unknown feature gate "NoSuchGate"`) {
		t.Fatalf("run = %v, want the unknown gate named", err)
	}
}

// A stray word on the command line (say, a flag that lost its --) stops
// draxr-autoscaler with an error naming it, and --version says which
// Kubernetes release the build serves.
func TestPositionalArgumentsAndVersion(t *testing.T) {
	cmd := NewCommand()
	cmd.SetArgs([]string{"--cloud-provider=clusterapi", "scale-down-enabled=false"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `unknown command "scale-down-enabled=false"`) {
		t.Errorf("stray argument: err = %v, want it named", err)
	}
	var out strings.Builder
	cmd = NewCommand()
	cmd.SetArgs([]string{"--version"})
	cmd.SetOut(&out)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "draxr-autoscaler ") || !strings.Contains(out.String(), "serves Kubernetes 1.") {
		t.Errorf("--version printed %q", out.String())
	}
}
