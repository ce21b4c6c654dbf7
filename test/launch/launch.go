// Package launch starts draxr test nodes (draxr-test-node) and reference
// drivers (draxr-example-driver) as child processes, for tests and for
// anything else that brings up nodes on one machine. Each child runs in
// its own process group, dies with its parent, and is stopped by PID.
package launch

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/kubelet/testnode/nodefs"
	"draxr.dev/draxr/kubelet/testnode/recordingcri"
	"draxr.dev/draxr/test/proc"
)

// Process is a started node or driver process.
type Process = proc.Process

// Node configures a draxr-test-node process.
type Node struct {
	Binary     string // draxr-test-node
	Name       string
	RootDir    string // kubelet root; keep it short (unix socket paths)
	Kubeconfig string
	Labels     map[string]string
	Taints     []v1.Taint
	ProviderID string
	// Stub runs kubemark's stock stub container manager (no DRA).
	Stub bool
	// Driver, when set, runs the reference driver inside the node process.
	Driver *InProcessDriver
	// Verbosity is the klog -v level.
	Verbosity int
	// Detached nodes outlive the process that started them, as machines
	// outlive the autoscaler that asked for them.
	Detached bool
}

// InProcessDriver configures the reference driver inside a test node.
type InProcessDriver struct {
	Name      string // DRA driver name
	Devices   int    // devices <Prefix>-0 ..
	Prefix    string // "gpu" if empty
	Inventory string // inventory file; overrides Devices
}

// Args are the node's command-line flags.
func (n Node) Args() []string {
	args := []string{"--name=" + n.Name, "--root-dir=" + n.RootDir, "--kubeconfig=" + n.Kubeconfig,
		"--v=" + strconv.Itoa(n.Verbosity)}
	if len(n.Labels) > 0 {
		var kv []string
		for k, v := range n.Labels {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		args = append(args, "--node-labels="+strings.Join(kv, ","))
	}
	if len(n.Taints) > 0 {
		var ts []string
		for _, t := range n.Taints {
			ts = append(ts, t.Key+"="+t.Value+":"+string(t.Effect))
		}
		args = append(args, "--register-with-taints="+strings.Join(ts, ","))
	}
	if n.ProviderID != "" {
		args = append(args, "--provider-id="+n.ProviderID)
	}
	if n.Stub {
		args = append(args, "--stub-container-manager")
	}
	if d := n.Driver; d != nil {
		args = append(args, "--driver-name="+d.Name, "--devices="+strconv.Itoa(d.Devices))
		if d.Prefix != "" {
			args = append(args, "--device-prefix="+d.Prefix)
		}
		if d.Inventory != "" {
			args = append(args, "--inventory="+d.Inventory)
		}
	}
	return args
}

// RunningNode is a started test node.
type RunningNode struct {
	*Process
	Spec Node
}

// StartNode starts a test node; its log is <RootDir>.log.
func StartNode(n Node) (*RunningNode, error) {
	required := []field{{"Binary", n.Binary}, {"Name", n.Name}, {"RootDir", n.RootDir}, {"Kubeconfig", n.Kubeconfig}}
	p, err := start("test node", required, n.Detached, n.Name, n.Binary, filepath.Clean(n.RootDir)+".log", n.Args())
	if err != nil {
		return nil, err
	}
	return &RunningNode{Process: p, Spec: n}, nil
}

// CDIDir is where the in-process driver writes CDI specs.
func (n *RunningNode) CDIDir() string { return nodefs.DriverCDIDir(n.Spec.RootDir) }

// DriverStateFile is where the in-process driver remembers prepared claims.
func (n *RunningNode) DriverStateFile() string {
	if n.Spec.Driver == nil {
		return ""
	}
	return nodefs.DriverStateFile(n.Spec.RootDir, n.Spec.Driver.Name)
}

// Containers returns every container the node's runtime created so far
// with the CDI devices it received.
func (n *RunningNode) Containers() ([]recordingcri.Container, error) {
	return recordingcri.Load(nodefs.RecordFile(n.Spec.RootDir))
}

// Driver configures a draxr-example-driver process for a test node.
type Driver struct {
	Binary     string // draxr-example-driver
	Name       string // DRA driver name
	NodeName   string
	KubeletDir string // the node's root directory
	Kubeconfig string
	CDIDir     string
	Devices    int
	Inventory  string // overrides Devices
	Verbosity  int
}

// StateFile is where the driver remembers prepared claims.
func (d Driver) StateFile() string { return nodefs.DriverStateFile(d.KubeletDir, d.Name) }

// Args are the driver's command-line flags.
func (d Driver) Args() []string {
	args := []string{"--driver-name=" + d.Name, "--node-name=" + d.NodeName, "--kubelet-dir=" + d.KubeletDir,
		"--kubeconfig=" + d.Kubeconfig, "--cdi-dir=" + d.CDIDir, "--state-file=" + d.StateFile(),
		"--devices=" + strconv.Itoa(d.Devices), "--v=" + strconv.Itoa(d.Verbosity)}
	if d.Inventory != "" {
		args = append(args, "--inventory="+d.Inventory)
	}
	return args
}

// RunningDriver is a started driver.
type RunningDriver struct {
	*Process
	Spec Driver
}

// StartDriver starts a driver; its log is <KubeletDir>-<driver>.log.
func StartDriver(d Driver) (*RunningDriver, error) {
	required := []field{{"Binary", d.Binary}, {"Name", d.Name}, {"NodeName", d.NodeName}, {"KubeletDir", d.KubeletDir}, {"CDIDir", d.CDIDir}}
	p, err := start("driver", required, false, d.NodeName+"/"+d.Name, d.Binary, filepath.Clean(d.KubeletDir)+"-"+d.Name+".log", d.Args())
	if err != nil {
		return nil, err
	}
	return &RunningDriver{Process: p, Spec: d}, nil
}

// field is a required setting of a Node or Driver.
type field struct{ name, value string }

// start starts binary once every required field is set; the error names
// the ones that are not.
func start(what string, required []field, detached bool, name, binary, logPath string, args []string) (*Process, error) {
	var missing []string
	for _, f := range required {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s %q: %s required", what, name, strings.Join(missing, ", "))
	}
	if detached {
		return proc.StartDetached(name, binary, logPath, args...)
	}
	return proc.Start(name, binary, logPath, args...)
}
