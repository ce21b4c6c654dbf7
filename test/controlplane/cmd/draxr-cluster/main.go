// Command draxr-cluster starts (up) and stops (down) the e2e control plane
// with draxr-scheduler for people, and adds to it test nodes (nodes),
// Kueue's manager (kueue) and an autoscaler (autoscaler): make cluster-up,
// cluster-nodes, cluster-kueue, cluster-autoscaler, cluster-down.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/launch"
)

const usage = `usage:
  draxr-cluster up STATE_DIR CONTROLPLANE_BIN_DIR DRAXR_SCHEDULER
  draxr-cluster nodes STATE_DIR COUNT DEVICES DRIVER TEST_NODE_BINARY
  draxr-cluster kueue STATE_DIR REPO_ROOT [NAME=DEVICECLASS[,DEVICECLASS...]...]
  draxr-cluster autoscaler STATE_DIR NODE_GROUPS AUTOSCALER_BINARY [FLAG...]
  draxr-cluster down STATE_DIR`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "draxr-cluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return errors.New(usage)
	}
	cmd, dir := args[0], args[1]
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	switch {
	case cmd == "up" && len(args) == 4:
		return up(dir, args[2], args[3])
	case cmd == "nodes" && len(args) == 6:
		count, err := strconv.Atoi(args[2])
		if err != nil || count < 1 {
			return fmt.Errorf("COUNT %q: want a positive number", args[2])
		}
		devices, err := strconv.Atoi(args[3])
		if err != nil || devices < 0 {
			return fmt.Errorf("DEVICES %q: want a number", args[3])
		}
		return nodes(dir, count, devices, args[4], args[5])
	case cmd == "kueue" && len(args) >= 3:
		return startKueue(dir, args[2], args[3:])
	case cmd == "autoscaler" && len(args) >= 4:
		return startAutoscaler(dir, args[2], args[3], args[4:])
	case cmd == "down" && len(args) >= 2:
		return down(dir)
	}
	return errors.New(usage)
}

// record is one started process in the state folder's pids file, in start
// order: "name pid" per line.
type record struct {
	name string
	pid  int
}

func pidsFile(dir string) string { return filepath.Join(dir, "pids") }

func readRecords(dir string) ([]record, error) {
	data, err := os.ReadFile(pidsFile(dir))
	if err != nil {
		return nil, fmt.Errorf("no cluster recorded in %s: %w", dir, err)
	}
	var out []record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pid, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return nil, fmt.Errorf("%s: bad line %q", pidsFile(dir), line)
		}
		name := strconv.Itoa(pid)
		if len(f) > 1 {
			name = f[0]
		}
		out = append(out, record{name: name, pid: pid})
	}
	return out, nil
}

func appendRecords(dir string, recs []record) error {
	f, err := os.OpenFile(pidsFile(dir), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := fmt.Fprintf(f, "%s %d\n", r.name, r.pid); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

func up(dir, binDir, scheduler string) error {
	if _, err := os.Stat(pidsFile(dir)); err == nil {
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
	var recs []record
	for _, p := range cp.Processes() {
		recs = append(recs, record{name: p.Name, pid: p.PID})
	}
	if err := appendRecords(dir, recs); err != nil {
		return err
	}
	fmt.Println("cluster up; processes (stopped by make cluster-down in reverse order):")
	for _, r := range recs {
		fmt.Printf("  %-24s pid %d, log %s\n", r.name, r.pid, filepath.Join(dir, r.name+".log"))
	}
	fmt.Printf("export KUBECONFIG=%s\n", cp.AdminKubeconfig)
	return nil
}

// nodes starts count test nodes (draxr-test-node, a real kubelet with the
// reference DRA driver in process publishing devices devices of driver),
// waits until each is Ready with its devices published and lifts the
// not-ready taint, as the node lifecycle controller would.
func nodes(dir string, count, devices int, driver, binary string) error {
	existing, err := readRecords(dir)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(count)*2*time.Minute)
	defer cancel()
	next := 0
	for _, r := range existing {
		if strings.HasPrefix(r.name, "node-") {
			next++
		}
	}
	for i := next; i < next+count; i++ {
		name := fmt.Sprintf("node-%d", i)
		// Unix socket paths are limited to 107 bytes: a short folder.
		root, err := os.MkdirTemp("", "dxc")
		if err != nil {
			return err
		}
		n, err := launch.StartNode(launch.Node{
			Binary: binary, Name: name, RootDir: filepath.Join(root, name), Kubeconfig: kubeconfig,
			Driver: &launch.InProcessDriver{Name: driver, Devices: devices}, Detached: true,
		})
		if err != nil {
			return err
		}
		if err := appendRecords(dir, []record{{name: name, pid: n.PID()}}); err != nil {
			return err
		}
		if err := controlplane.WaitReadyAndUntaint(ctx, client, name, 90*time.Second); err != nil {
			return fmt.Errorf("%w\n%s", err, n.LogTail(3000))
		}
		if err := waitDevices(ctx, client, name, driver, devices); err != nil {
			return fmt.Errorf("%w\n%s", err, n.LogTail(3000))
		}
		fmt.Printf("node %s Ready with %d %s devices; pid %d, log %s.log\n", name, devices, driver, n.PID(), filepath.Join(root, name))
	}
	return nil
}

func waitDevices(ctx context.Context, client kubernetes.Interface, node, driver string, want int) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		got := 0
		for _, s := range list.Items {
			if s.Spec.Driver == driver {
				got += len(s.Spec.Devices)
			}
		}
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: %d devices of %s not published: %w", node, want, driver, err)
	}
	return nil
}

// down stops every recorded process in reverse start order (test nodes,
// then the scheduler, the controller-manager, the API server and etcd
// last), each with SIGTERM and up to 10 s to exit before SIGKILL, and
// waits for each before the next.
func down(dir string) error {
	recs, err := readRecords(dir)
	if err != nil {
		return err
	}
	slices.Reverse(recs)
	for _, r := range recs {
		stopGroup(r)
		// The machines an autoscaler made outlive it, as machines do.
		if nodes, err := os.ReadFile(filepath.Join(dir, r.name+".nodes")); err == nil {
			stopLaunched(strings.TrimSpace(string(nodes)))
		}
	}
	return os.RemoveAll(dir)
}

// stopLaunched stops the test nodes whose PID files are in nodeDir (an
// autoscaler's --local-test-node-dir) and removes the folder.
func stopLaunched(nodeDir string) {
	for name, pid := range launch.PIDs(nodeDir) {
		stopGroup(record{name: name, pid: pid})
	}
	_ = os.RemoveAll(nodeDir)
}

func stopGroup(r record) {
	alive := func() bool { return syscall.Kill(-r.pid, 0) == nil }
	if !alive() {
		return
	}
	_ = syscall.Kill(-r.pid, syscall.SIGTERM)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !alive(), nil
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "draxr-cluster: %s (pid %d) did not exit on SIGTERM within 10s; killing it\n", r.name, r.pid)
		_ = syscall.Kill(-r.pid, syscall.SIGKILL)
		_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return !alive(), nil
		})
	}
	fmt.Printf("stopped %s (pid %d)\n", r.name, r.pid)
}
