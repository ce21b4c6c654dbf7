package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/kubelet/testnode/nodefs"
	"draxr.dev/draxr/kubelet/testnode/recordingcri"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/test/launch"
)

// The autoscaler starts real test nodes: each registers itself, its DRA
// driver publishes the devices, and the kubelet's DRA manager prepares the
// scheduler-created claims, so every container receives the CDI ID of its
// own device. Scaling down stops the node processes.
func TestAutoscalerStartsKubeletNodes(t *testing.T) {
	nodeBin, _ := nodeBinaries(t)
	e := newEnv(t, "askub")
	e.class("askub-gpu", e.driver, e.resource)
	// Unix socket paths are limited to 107 bytes: a short folder.
	dir, err := os.MkdirTemp("", "dxa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killTestNodes(t, dir) })

	// A hollow kubelet reports 1 CPU and 3.75 GiB; the template says so.
	tmpl := fx.Node("template", 1, 0, nil)
	tmpl.Name, tmpl.UID, tmpl.Status.Conditions = "", "", nil
	tmpl.Labels = map[string]string{"e2e-test": e.name}
	tmpl.Status.Capacity[v1.ResourceMemory] = *resource.NewQuantity(4026531840, resource.BinarySI)
	tmpl.Status.Allocatable = tmpl.Status.Capacity
	ng := nodegroup.NodeGroup{TypeMeta: metav1.TypeMeta{APIVersion: nodegroup.APIVersion, Kind: nodegroup.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "askub-gpu"},
		Spec:       nodegroup.Spec{MinSize: 0, MaxSize: 4, Template: *tmpl}}
	slice := fx.DeviceSlice("x", e.driver, 4, "gpu").Spec
	slice.NodeName, slice.Pool = nil, resourcePool()
	ng.Spec.ResourceSlices = append(ng.Spec.ResourceSlices, slice)
	data, err := yaml.Marshal(ng)
	if err != nil {
		t.Fatal(err)
	}
	groups := filepath.Join(t.TempDir(), "nodegroups.yaml")
	if err := os.WriteFile(groups, data, 0o600); err != nil {
		t.Fatal(err)
	}
	e.autoscalerBinary("draxr-autoscaler-testnodes", groups, "--local-test-node-binary="+nodeBin, "--local-test-node-dir="+dir,
		"--local-test-node-kubeconfig="+cp.AdminKubeconfig, "--scale-down-unneeded-time=3s")

	e.replicaSet("infer", 6, e.resource, 1)
	if perNode := e.waitPodsBound(6, 120*time.Second); len(perNode) != 2 {
		t.Fatalf("pods per node = %v, want 2 nodes of 4 GPUs", perNode)
	}
	// Every container ran on a real kubelet and received its own device.
	e.eventually(60*time.Second, "containers started with CDI devices", func() error {
		seen := map[string]string{}
		for _, node := range []string{"askub-gpu-0", "askub-gpu-1"} {
			containers, err := recordingcri.Load(nodefs.RecordFile(filepath.Join(dir, node)))
			if err != nil {
				return err
			}
			for _, c := range containers {
				if c.Namespace != e.ns {
					continue
				}
				if len(c.CDIDevices) != 1 {
					return fmt.Errorf("pod %s container %s got CDI devices %v, want one", c.Pod, c.Name, c.CDIDevices)
				}
				id := node + " " + c.CDIDevices[0]
				if other, dup := seen[id]; dup && other != c.Pod {
					return fmt.Errorf("device %s handed to %s and %s", id, other, c.Pod)
				}
				seen[id] = c.Pod
			}
		}
		if len(seen) != 6 {
			return fmt.Errorf("%d containers with a device so far, want 6", len(seen))
		}
		return nil
	})

	e.scaleReplicaSet("infer", 0)
	e.eventually(60*time.Second, "test nodes removed", func() error {
		if n := len(e.groupNodes("askub-gpu")); n != 0 {
			return fmt.Errorf("group has %d nodes", n)
		}
		if pids, _ := filepath.Glob(filepath.Join(dir, "*.pid")); len(pids) != 0 {
			return fmt.Errorf("node processes still recorded: %v", pids)
		}
		return nil
	})
}

// killTestNodes stops, by PID, test nodes the autoscaler left running.
func killTestNodes(t *testing.T, dir string) {
	for name, pid := range launch.PIDs(dir) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t.Logf("stopped leftover test node %s (pid %d)", name, pid)
	}
	_ = os.RemoveAll(dir)
}
