package app

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFailureFlagValidation(t *testing.T) {
	base := []string{"--node-group-config=g.yaml"}
	tests := []struct {
		args []string
		want string // "" means valid
	}{
		{nil, ""},
		{[]string{"--leader-elect-lease-duration=0s"}, "--leader-elect-lease-duration (0s) must be greater than --leader-elect-renew-deadline (10s)"},
		{[]string{"--leader-elect-lease-duration=1s"}, "--leader-elect-lease-duration (1s) must be greater than --leader-elect-renew-deadline (10s)"},
		{[]string{"--leader-elect-lease-duration=10s"}, "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"},
		{[]string{"--leader-elect-renew-deadline=2s"}, "--leader-elect-renew-deadline (2s) must be greater than --leader-elect-retry-period (2s)"},
		{[]string{"--leader-elect-retry-period=0s"}, "--leader-elect-retry-period must be positive"},
		{[]string{"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=1s"}, ""},
		{[]string{"--max-node-provision-time=0s"}, "--max-node-provision-time must be positive"},
		{[]string{"--max-node-startup-time=-1m"}, "--max-node-startup-time must be positive"},
		{[]string{"--initial-node-group-backoff-duration=0s"}, "--initial-node-group-backoff-duration must be positive"},
		{[]string{"--max-node-group-backoff-duration=1m"}, "--max-node-group-backoff-duration (1m0s) must not be less than --initial-node-group-backoff-duration (5m0s)"},
		{[]string{"--node-group-backoff-reset-timeout=0s"}, "--node-group-backoff-reset-timeout must be positive"},
		{[]string{"--ok-total-unready-count=-1"}, "--ok-total-unready-count must be >= 0"},
		{[]string{"--max-total-unready-percentage=101"}, "--max-total-unready-percentage must be within [0, 100]"},
		{[]string{"--max-inactivity=0s"}, "--max-inactivity must be positive"},
		{[]string{"--max-failing-time=0s"}, "--max-failing-time must be positive"},
		{[]string{"--max-startup-time=0s"}, "--max-startup-time must be positive"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addFlags(fs)
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

// CA's defaults, as --help shows them.
func TestFailureFlagDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	(&options{}).addFlags(fs)
	for flag, want := range map[string]string{
		"max-node-provision-time": "15m0s", "max-node-startup-time": "15m0s",
		"initial-node-group-backoff-duration": "5m0s", "max-node-group-backoff-duration": "30m0s",
		"node-group-backoff-reset-timeout": "3h0m0s", "ok-total-unready-count": "3", "max-total-unready-percentage": "45",
		"max-inactivity": "10m0s", "max-failing-time": "15m0s", "max-startup-time": "20m0s",
		"leader-elect-lease-duration": "15s", "leader-elect-renew-deadline": "10s", "leader-elect-retry-period": "2s",
	} {
		f := fs.Lookup(flag)
		if f == nil || f.DefValue != want {
			t.Errorf("--%s default = %v, want %s", flag, f, want)
		}
	}
}

// A port already in use is a start-up error naming the flag, returned
// before any loop starts.
func TestAddressInUseIsAStartupError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	groups := filepath.Join(dir, "groups.yaml")
	data, err := os.ReadFile("../../simulator/examples/builtin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(groups, data, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := NewCommand()
	cmd.SetArgs([]string{"--kubeconfig=" + kubeconfig, "--node-group-config=" + groups, "--address=" + busy.Addr().String()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "--address "+busy.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("run = %v, want an --address error saying the address is in use", err)
	}
}
