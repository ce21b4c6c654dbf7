package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/cloudprovider/nodegroup"
	"draxr.dev/draxr/kubelet/testnode/launch"
)

// TestNodes makes the provider start real test nodes (draxr-test-node:
// kubemark's kubelet with the real DRA manager and the reference driver in
// process) instead of Node objects: the node registers itself, its driver
// publishes the ResourceSlices, and pods' devices are prepared through the
// kubelet's DRA path. Processes are detached, like machines that outlive
// the autoscaler, and tracked by PID files in Dir.
type TestNodes struct {
	Binary     string // draxr-test-node
	Kubeconfig string // credentials the nodes register with
	Dir        string // one root directory and PID file per node
}

func (t *TestNodes) pidFile(node string) string { return filepath.Join(t.Dir, node+".pid") }

// start launches a node of the group. The template's first ResourceSlice
// says which driver runs in the node and how many devices it has.
func (t *TestNodes) start(g *nodegroup.NodeGroup, name string) error {
	tmpl, _ := g.NewNode(name)
	n := launch.Node{Binary: t.Binary, Name: name, RootDir: filepath.Join(t.Dir, name), Kubeconfig: t.Kubeconfig,
		Labels: tmpl.Labels, Taints: tmpl.Spec.Taints, ProviderID: ProviderIDPrefix + g.Name + "/" + name, Detached: true}
	delete(n.Labels, v1.LabelHostname) // the kubelet sets it
	if len(g.Spec.ResourceSlices) > 0 {
		s := g.Spec.ResourceSlices[0]
		prefix := "gpu"
		if len(s.Devices) > 0 {
			prefix, _, _ = strings.Cut(s.Devices[0].Name, "-")
		}
		n.Driver = &launch.InProcessDriver{Name: s.Driver, Devices: len(s.Devices), Prefix: prefix}
	}
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return err
	}
	rn, err := launch.StartNode(n)
	if err != nil {
		return fmt.Errorf("node group %s: start test node %s: %w", g.Name, name, err)
	}
	return os.WriteFile(t.pidFile(name), []byte(strconv.Itoa(rn.PID())), 0o644)
}

// launched lists the group's nodes started but maybe not yet registered.
func (t *TestNodes) launched(group string) []string {
	files, _ := filepath.Glob(filepath.Join(t.Dir, group+"-*.pid"))
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".pid"))
	}
	return out
}

// stop ends a node's process group by PID.
func (t *TestNodes) stop(ctx context.Context, node string) error {
	data, err := os.ReadFile(t.pidFile(node))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	return os.Remove(t.pidFile(node))
}
