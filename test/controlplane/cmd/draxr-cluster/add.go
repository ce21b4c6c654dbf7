package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/kueue"
)

// startKueue installs the ProvisioningRequest CRD (Kueue's provisioning
// admission check is set up only when it is served) and Kueue's CRDs,
// and runs Kueue's manager as the end-to-end tests do (test/kueue),
// recorded so that down stops it. Each mapping NAME=CLASS[,CLASS...]
// charges claim-template pods' devices of those DeviceClasses to quota
// as NAME.
func startKueue(dir, root string, mappings []string) error {
	var opts kueue.Options
	for _, m := range mappings {
		name, classes, ok := strings.Cut(m, "=")
		if !ok || name == "" || classes == "" {
			return fmt.Errorf("device class mapping %q: want NAME=DEVICECLASS[,DEVICECLASS...]", m)
		}
		opts.DeviceClassMappings = append(opts.DeviceClassMappings, kueue.DeviceClassMapping{Name: name, DeviceClassNames: strings.Split(classes, ",")})
	}
	if err := notRunning(dir, "kueue"); err != nil {
		return err
	}
	cp, err := controlplane.Attach(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cp.InstallCRDFiles(ctx, filepath.Join(root, "charts/draxr/crds/autoscaling.x-k8s.io_provisioningrequests.yaml")); err != nil {
		return err
	}
	p, err := kueue.StartWith(ctx, cp, root, opts)
	if err != nil {
		return err
	}
	if err := appendRecords(dir, []record{{name: "kueue", pid: p.PID()}}); err != nil {
		return err
	}
	fmt.Printf("kueue's manager runs: pid %d, log %s, config %s\n", p.PID(), filepath.Join(dir, "kueue.log"), filepath.Join(dir, "kueue", "config.yaml"))
	return nil
}

// startAutoscaler runs an autoscaler build on the cluster with the admin
// kubeconfig, the scheduler's configuration and the NodeGroups file,
// detached and recorded. With --local-test-node-binary among the flags
// (draxr-autoscaler-testnodes), its nodes are test kubelets in a folder
// of their own, stopped by down after the autoscaler.
func startAutoscaler(dir, groups, binary string, extra []string) error {
	if err := notRunning(dir, "draxr-autoscaler"); err != nil {
		return err
	}
	if _, err := os.Stat(groups); err != nil {
		return fmt.Errorf("node groups: %w", err)
	}
	schedulerConfig, err := filepath.Abs("scheduler/deploy/scheduler-config.yaml")
	if err != nil {
		return err
	}
	cp, err := controlplane.Attach(dir)
	if err != nil {
		return err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--kubeconfig=" + cp.AdminKubeconfig, "--node-group-config=" + groups,
		"--scheduler-config=" + schedulerConfig, "--leader-elect=false", "--address=" + addr}
	var nodeDir string
	for _, a := range extra {
		if strings.HasPrefix(a, "--local-test-node-binary=") {
			// Unix socket paths are limited to 107 bytes: a short folder.
			if nodeDir, err = os.MkdirTemp("", "dxa"); err != nil {
				return err
			}
			args = append(args, "--local-test-node-dir="+nodeDir, "--local-test-node-kubeconfig="+cp.AdminKubeconfig)
		}
	}
	args = append(args, extra...)
	p, err := cp.StartProcess("draxr-autoscaler", binary, args...)
	if err != nil {
		return err
	}
	if err := appendRecords(dir, []record{{name: "draxr-autoscaler", pid: p.PID()}}); err != nil {
		return err
	}
	if nodeDir != "" {
		if err := os.WriteFile(filepath.Join(dir, "draxr-autoscaler.nodes"), []byte(nodeDir+"\n"), 0o644); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if exited, werr := p.Exited(); exited {
			return fmt.Errorf("%s exited: %v\n%s", filepath.Base(binary), werr, p.LogTail(4000))
		}
		if resp, err := http.Get("http://" + addr + "/health-check"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy within a minute (left running; make cluster-down stops it)\n%s", filepath.Base(binary), p.LogTail(4000))
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Printf("%s runs: pid %d, log %s, /metrics and /health-check on %s\n", filepath.Base(binary), p.PID(), filepath.Join(dir, "draxr-autoscaler.log"), addr)
	if nodeDir != "" {
		fmt.Printf("its nodes are test kubelets (they run pods): roots and PID files in %s\n", nodeDir)
	}
	fmt.Println("  args:", strings.Join(args, " "))
	return nil
}

// notRunning fails unless the cluster in dir is up and has no process
// recorded as name: one of each runs.
func notRunning(dir, name string) error {
	recs, err := readRecords(dir)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.name == name {
			return fmt.Errorf("%s already runs in %s (pid %d)", name, dir, r.pid)
		}
	}
	return nil
}
