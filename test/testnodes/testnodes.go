// Package testnodes plugs real test nodes into the local provider: each
// new node is a draxr-test-node process (kubemark's kubelet with the real
// DRA manager and the reference driver in process) that registers itself,
// publishes its ResourceSlices and prepares pods' devices through the
// kubelet's DRA path. Processes are detached, like machines that outlive
// the autoscaler, and tracked by PID files in Dir.
package testnodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/autoscaler/app"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/test/launch"
)

// TestNodes implements local.Launcher with draxr-test-node processes.
type TestNodes struct {
	Binary     string // draxr-test-node
	Kubeconfig string // credentials the nodes register with
	Dir        string // one root directory and PID file per node
}

var _ local.Launcher = &TestNodes{}

// Extension adds the --local-test-node-* flags to draxr-autoscaler and,
// when --local-test-node-binary is set, makes the local provider start
// test nodes.
func Extension() app.Extension {
	t := &TestNodes{}
	return app.Extension{
		AddFlags: func(fs *pflag.FlagSet) {
			fs.StringVar(&t.Binary, "local-test-node-binary", "", "local provider: start draxr-test-node processes (real kubelet DRA path) instead of Node objects")
			fs.StringVar(&t.Dir, "local-test-node-dir", "", "local provider: folder for test nodes' root directories and PID files")
			fs.StringVar(&t.Kubeconfig, "local-test-node-kubeconfig", "", "local provider: kubeconfig test nodes register with")
		},
		Launcher: func() (local.Launcher, error) {
			if t.Binary == "" {
				return nil, nil
			}
			if t.Dir == "" || t.Kubeconfig == "" {
				return nil, fmt.Errorf("--local-test-node-binary needs --local-test-node-dir and --local-test-node-kubeconfig")
			}
			return t, nil
		},
	}
}

func (t *TestNodes) pidFile(node string) string { return filepath.Join(t.Dir, node+".pid") }

// Start launches a node of the group. The template's first ResourceSlice
// says which driver runs in the node and how many devices it has.
func (t *TestNodes) Start(_ context.Context, g *nodegroup.NodeGroup, name, providerID string) error {
	tmpl, _ := g.NewNode(name)
	n := launch.Node{Binary: t.Binary, Name: name, RootDir: filepath.Join(t.Dir, name), Kubeconfig: t.Kubeconfig,
		Labels: tmpl.Labels, Taints: tmpl.Spec.Taints, ProviderID: providerID, Detached: true}
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
		return fmt.Errorf("start test node: %w", err)
	}
	return os.WriteFile(t.pidFile(name), []byte(strconv.Itoa(rn.PID())), 0o644)
}

// Launched lists the group's nodes started but maybe not yet registered.
func (t *TestNodes) Launched(group string) []string {
	files, _ := filepath.Glob(filepath.Join(t.Dir, group+"-*.pid"))
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".pid"))
	}
	return out
}

// Stop ends a node's process group by PID.
func (t *TestNodes) Stop(_ context.Context, node string) error {
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
