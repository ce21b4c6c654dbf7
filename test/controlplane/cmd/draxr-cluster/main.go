// Command draxr-cluster starts (up) and stops (down) the e2e control plane
// with draxr-scheduler for people: make cluster-up, make cluster-down.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"draxr.dev/draxr/test/controlplane"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: draxr-cluster up|down STATE_DIR CONTROLPLANE_BIN_DIR DRAXR_SCHEDULER")
		os.Exit(2)
	}
	cmd, dir, binDir, scheduler := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	var err error
	switch cmd {
	case "up":
		err = up(dir, binDir, scheduler)
	case "down":
		err = down(dir)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "draxr-cluster:", err)
		os.Exit(1)
	}
}

func up(dir, binDir, scheduler string) error {
	if _, err := os.Stat(filepath.Join(dir, "pids")); err == nil {
		return fmt.Errorf("a cluster is already up in %s (make cluster-down first)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir, Dir: dir, Detach: true})
	if err != nil {
		return err
	}
	if _, err := cp.StartScheduler(ctx, controlplane.SchedulerOptions{
		Binary: scheduler, Config: "scheduler/deploy/scheduler-config.yaml", RBAC: "scheduler/deploy/rbac.yaml",
		ServiceAccount: "kube-system/draxr-scheduler",
	}); err != nil {
		cp.Stop()
		return err
	}
	var pids []string
	for _, pid := range cp.PIDs() {
		pids = append(pids, strconv.Itoa(pid))
	}
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(strings.Join(pids, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("cluster up; export KUBECONFIG=%s\n", cp.AdminKubeconfig)
	return nil
}

func down(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return fmt.Errorf("no cluster recorded in %s: %w", dir, err)
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGTERM)
		}
	}
	// A grace period to exit on SIGTERM, ended early once every process
	// group is gone; then SIGKILL for what is left.
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(-pid, 0) == nil {
				return false, nil
			}
		}
		return true, nil
	})
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	return os.RemoveAll(dir)
}
