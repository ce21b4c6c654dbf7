// Package e2e runs draxr against a real control plane on 127.0.0.1: etcd,
// kube-apiserver and kube-controller-manager built from go.mod versions,
// and draxr-scheduler under its own ServiceAccount.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"draxr.dev/draxr/test/auditlog"
	"draxr.dev/draxr/test/controlplane"
)

var (
	cp   *controlplane.ControlPlane
	root string // repository root
	bins string // draxr binaries built for the tests
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// make test-unit: build and start nothing; every test skips itself
		// in skipUnderShort.
		return m.Run()
	}
	var err error
	if root, err = controlplane.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binDir, err := controlplane.Build(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build control plane:", err)
		return 1
	}
	// Under bin/, not .cache/: .cache may be shared by several checkouts,
	// which must not run each other's builds.
	bins = filepath.Join(root, "bin", "e2e")
	if out, err := goCmd("build", "-o", bins+"/", "./scheduler/cmd/draxr-scheduler", "./autoscaler/cmd/draxr-autoscaler", "./autoscaler/cmd/draxr", "./test/cmd/draxr-autoscaler-testnodes").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: build draxr binaries: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The Workload API (beta, off by default) is served for the gang
	// tests, with PodGroups' topology constraints (alpha) for the rack
	// gang; only schedulers and autoscalers started with the gates act on
	// them (the default scheduler below has none).
	// The autoscaler's requests (only) are audited: a steady loop must
	// send no LIST of what it watches (auditlog).
	cp, err = controlplane.Start(ctx, controlplane.Options{BinDir: binDir, APIServerArgs: []string{
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"},
		AuditUsers: []string{auditlog.AutoscalerUser}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start control plane:", err)
		return 1
	}
	defer cp.Stop()
	if _, err := cp.StartScheduler(ctx, schedulerOptions("")); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start draxr-scheduler:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, cp.Logs())
	}
	return code
}

// skipUnderShort skips a test that needs the control plane under -short;
// newEnv and nodeBinaries, where every test starts, call it.
func skipUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control plane (run without -short)")
	}
}

func schedulerOptions(profile string) controlplane.SchedulerOptions {
	name := "draxr-scheduler"
	if profile != "" {
		name = "draxr-scheduler-" + profile
	}
	return controlplane.SchedulerOptions{
		Binary:         filepath.Join(bins, "draxr-scheduler"),
		Config:         filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		RBAC:           filepath.Join(root, "scheduler/deploy/rbac.yaml"),
		ServiceAccount: "kube-system/draxr-scheduler",
		ProfileName:    profile,
		Name:           name,
	}
}

func goCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	return cmd
}
