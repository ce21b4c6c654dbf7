package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"draxr.dev/draxr/kubelet/cdi"
	"draxr.dev/draxr/kubelet/driver"
	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/launch"
)

// cdiClass is the CDI class the drivers in these tests use (the default).
const cdiClass = "gpu"

var (
	nodeBinsOnce sync.Once
	nodeBinsErr  error

	driverKubeconfigOnce sync.Once
	driverKubeconfigPath string
	driverKubeconfigErr  error
)

// driverKubeconfig applies the driver's shipped RBAC and returns a
// kubeconfig for its ServiceAccount: the drivers in these tests run with
// exactly the rights kubelet/deploy grants.
func driverKubeconfig(t *testing.T) string {
	t.Helper()
	driverKubeconfigOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if driverKubeconfigErr = cp.Apply(ctx, filepath.Join(root, "kubelet/deploy/rbac.yaml")); driverKubeconfigErr != nil {
			return
		}
		token, err := cp.ServiceAccountToken(ctx, "kube-system", "draxr-example-driver")
		if err != nil {
			driverKubeconfigErr = err
			return
		}
		driverKubeconfigPath = filepath.Join(cp.Dir, "draxr-example-driver.kubeconfig")
		driverKubeconfigErr = controlplane.WriteKubeconfig(driverKubeconfigPath, cp.URL, cp.AdminConfig.CAData, token)
	})
	if driverKubeconfigErr != nil {
		t.Fatal(driverKubeconfigErr)
	}
	return driverKubeconfigPath
}

// nodeBinaries builds draxr-test-node and draxr-example-driver once per run.
func nodeBinaries(t *testing.T) (testNode, exampleDriver string) {
	t.Helper()
	skipUnderShort(t)
	nodeBinsOnce.Do(func() {
		if out, err := goCmd("build", "-o", bins+"/", "./kubelet/cmd/draxr-test-node", "./kubelet/cmd/draxr-example-driver").CombinedOutput(); err != nil {
			nodeBinsErr = fmt.Errorf("build test node: %v\n%s", err, out)
		}
	})
	if nodeBinsErr != nil {
		t.Fatal(nodeBinsErr)
	}
	return filepath.Join(bins, "draxr-test-node"), filepath.Join(bins, "draxr-example-driver")
}

// newKubeletEnv is newEnv for tests with kubelet nodes: the node
// binaries are built first, so a cold build does not eat into the env's
// time budget.
func newKubeletEnv(t *testing.T, name string) *env {
	t.Helper()
	nodeBinaries(t)
	return newEnv(t, name)
}

// kubeletNode is a test node of the env: a real kubelet (draxr-test-node)
// with a DRA driver, where the test can see what the driver prepared
// (its state file and CDI folder) and what each container received (the
// node's runtime record).
type kubeletNode struct {
	e         *env
	node      *launch.RunningNode
	driver    *launch.RunningDriver // nil when the driver runs inside the node
	cdi       cdi.Dir
	stateFile string
	logs      []*launch.Process
}

type nodeSetup struct {
	devices int
	// stub runs kubemark's stock stub container manager (no DRA) with the
	// driver in the node process.
	stub bool
}

// kubeletNode starts a test node and its driver, waits until the node is
// Ready, schedulable and its devices are published, and stops both by PID
// when the test ends.
func (e *env) kubeletNode(name string, setup nodeSetup) *kubeletNode {
	e.t.Helper()
	nodeBin, driverBin := nodeBinaries(e.t)
	// Unix socket paths are limited to 107 bytes: a short folder of our own.
	dir, err := os.MkdirTemp("", "dxn")
	if err != nil {
		e.t.Fatal(err)
	}
	root := filepath.Join(dir, name)
	n := &kubeletNode{e: e}
	spec := launch.Node{Binary: nodeBin, Name: name, RootDir: root, Kubeconfig: cp.AdminKubeconfig,
		Labels: map[string]string{"e2e-test": e.name}, Stub: setup.stub}
	if setup.stub {
		spec.Driver = &launch.InProcessDriver{Name: e.driver, Devices: setup.devices}
	}
	started := time.Now()
	if n.node, err = launch.StartNode(spec); err != nil {
		e.t.Fatal(err)
	}
	n.logs = append(n.logs, n.node.Process)
	n.cdi, n.stateFile = cdi.Dir{Path: n.node.CDIDir(), Vendor: e.driver, Class: cdiClass}, n.node.DriverStateFile()
	if !setup.stub {
		d := launch.Driver{Binary: driverBin, Name: e.driver, NodeName: name, KubeletDir: root,
			Kubeconfig: driverKubeconfig(e.t), CDIDir: filepath.Join(dir, "cdi"), Devices: setup.devices}
		if n.driver, err = launch.StartDriver(d); err != nil {
			n.stop()
			e.t.Fatal(err)
		}
		n.logs = append(n.logs, n.driver.Process)
		n.cdi.Path, n.stateFile = d.CDIDir, d.StateFile()
	}
	e.t.Cleanup(func() {
		n.stop()
		// The shipped RBAC must be enough for everything the driver did.
		if n.driver != nil && strings.Contains(n.driver.LogTail(1<<20), "forbidden") {
			e.t.Errorf("driver hit an authorization error with the shipped RBAC")
		}
		if e.t.Failed() {
			e.t.Log(n.logTails())
		}
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = os.RemoveAll(dir)
	})
	n.waitReady()
	n.waitSlices(setup.devices)
	if !setup.stub {
		n.waitLog(n.driver.Process, driver.RegisteredMessage)
	}
	e.t.Logf("node %s: Ready with %d devices published in %s", name, setup.devices, time.Since(started).Round(10*time.Millisecond))
	return n
}

// restartDriver kills the driver process, as a crash or an abrupt
// upgrade would, and starts a new one with the same flags.
func (n *kubeletNode) restartDriver() {
	n.e.t.Helper()
	n.driver.Kill()
	next, err := launch.StartDriver(n.driver.Spec)
	if err != nil {
		n.e.t.Fatal(err)
	}
	n.logs = append(slices.DeleteFunc(n.logs, func(p *launch.Process) bool { return p == n.driver.Process }), next.Process)
	n.driver = next
	n.waitLog(next.Process, driver.RegisteredMessage)
}

func (n *kubeletNode) stop() {
	// Driver first, as on a real node being drained of its plugins.
	for i := len(n.logs) - 1; i >= 0; i-- {
		n.logs[i].Stop(10 * time.Second)
	}
}

func (n *kubeletNode) logTails() string {
	var b strings.Builder
	for _, p := range n.logs {
		fmt.Fprintf(&b, "\n--- %s log (tail) ---\n%s", p.Name, p.LogTail(4000))
	}
	return b.String()
}

// waitReady waits until the kubelet reports the node Ready, then lifts the
// not-ready taint, which the node lifecycle controller would lift in a
// full cluster; the e2e control plane does not run it.
func (n *kubeletNode) waitReady() {
	n.e.t.Helper()
	if err := controlplane.WaitReadyAndUntaint(n.e.ctx, cp.Client, n.node.Name, 60*time.Second); err != nil {
		n.e.t.Fatalf("%v%s", err, n.logTails())
	}
}

// waitSlices waits until the driver's ResourceSlices for the node list
// all devices.
func (n *kubeletNode) waitSlices(devices int) {
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: n.node.Name, resourceapi.ResourceSliceSelectorDriver: n.e.driver}.String()
	n.poll(60*time.Second, "ResourceSlices published", func(ctx context.Context) (bool, error) {
		slices, err := cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, nil
		}
		got := 0
		for _, s := range slices.Items {
			got += len(s.Spec.Devices)
		}
		return got == devices, nil
	})
}

func (n *kubeletNode) waitLog(p *launch.Process, line string) {
	n.poll(60*time.Second, fmt.Sprintf("%s logs %q", p.Name, line), func(context.Context) (bool, error) {
		return strings.Contains(p.LogTail(1<<20), line), nil
	})
}

func (n *kubeletNode) poll(timeout time.Duration, what string, cond wait.ConditionWithContextFunc) {
	n.e.t.Helper()
	if err := wait.PollUntilContextTimeout(n.e.ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range n.logs {
			if done, err := p.Exited(); done {
				return false, fmt.Errorf("%s exited: %v", p.Name, err)
			}
		}
		return cond(ctx)
	}); err != nil {
		n.e.t.Fatalf("node %s: %s: %v%s", n.node.Name, what, err, n.logTails())
	}
}

// waitRunning waits until the pod is Running on a kubelet node.
func (e *env) waitRunning(name string) *v1.Pod {
	e.t.Helper()
	return e.waitPod(name, 60*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }, func(last *v1.Pod, err error) {
		phase := v1.PodPhase("not found")
		if last != nil {
			phase = last.Status.Phase
		}
		e.t.Fatalf("pod %s not Running (%s): %v; conditions: %v", name, phase, err, conditions(last))
	})
}

// createPod creates a pod from containers, restricted to the env's nodes.
func (e *env) createPod(name string, initContainers, containers []v1.Container) *v1.Pod {
	e.t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"e2e-test": e.name}, TerminationGracePeriodSeconds: new(int64),
			InitContainers: initContainers, Containers: containers},
	}
	created, err := cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// container asks for gpus of the env's resource in limits, as users
// write it; 0 asks for nothing.
func (e *env) container(name string, gpus int64) v1.Container {
	c := v1.Container{Name: name, Image: "registry.example/app"}
	if gpus > 0 {
		c.Resources.Limits = v1.ResourceList{e.resource: *resourceQuantity(gpus)}
	}
	return c
}

// wantCDI is what each container of the pod must have received: the CDI
// IDs of the devices allocated for the requests that
// extendedResourceClaimStatus maps to it; nothing for the others.
func (n *kubeletNode) wantCDI(pod *v1.Pod, claim *resourceapi.ResourceClaim) map[string][]string {
	byRequest := map[string][]string{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		byRequest[r.Request] = append(byRequest[r.Request], n.cdi.ID(r.Device))
	}
	want := map[string][]string{}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		want[c.Name] = []string{}
	}
	for _, m := range pod.Status.ExtendedResourceClaimStatus.RequestMappings {
		want[m.ContainerName] = append(want[m.ContainerName], byRequest[m.RequestName]...)
	}
	return want
}

// gotCDI is what the node's runtime received for each container of the
// pod (first attempt).
func (n *kubeletNode) gotCDI(pod *v1.Pod) map[string][]string {
	n.e.t.Helper()
	containers, err := n.node.Containers()
	if err != nil {
		n.e.t.Fatal(err)
	}
	got := map[string][]string{}
	for _, c := range containers {
		if c.PodUID == string(pod.UID) && c.Attempt == 0 {
			got[c.Name] = c.CDIDevices
		}
	}
	return got
}

// checkPrepared checks the node side of a pod's extended-resource claim:
// the driver was asked to prepare exactly that claim and wrote its CDI
// spec with the allocated devices. It returns an error a test can report.
func (n *kubeletNode) checkPrepared(claim *resourceapi.ResourceClaim) error {
	st, err := driver.LoadState(n.stateFile)
	if err != nil {
		return err
	}
	prepared, ok := st.Claims[claim.UID]
	if !ok {
		return fmt.Errorf("no NodePrepareResources call for claim %s (%s): the driver's prepared claims are %v", claim.Name, claim.UID, st.Claims)
	}
	if prepared.Name != claim.Name || prepared.Namespace != claim.Namespace {
		return fmt.Errorf("prepared claim %s is %s/%s, want %s/%s", claim.UID, prepared.Namespace, prepared.Name, claim.Namespace, claim.Name)
	}
	var want, specDevices, preparedDevices []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		want = append(want, r.Device)
	}
	for _, d := range prepared.Devices {
		preparedDevices = append(preparedDevices, d.Device)
	}
	spec, err := cdi.Read(n.cdi.SpecPath(string(claim.UID)))
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", claim.Name, err)
	}
	for _, d := range spec.Devices {
		specDevices = append(specDevices, d.Name)
	}
	slices.Sort(want)
	slices.Sort(preparedDevices)
	slices.Sort(specDevices)
	if !slices.Equal(preparedDevices, want) || !slices.Equal(specDevices, want) || spec.Kind != n.cdi.Kind() {
		return fmt.Errorf("claim %s: allocated %v, prepared %v, CDI spec %s with %v", claim.Name, want, preparedDevices, spec.Kind, specDevices)
	}
	return nil
}

// waitUnprepared waits until the driver has forgotten the claim and its
// CDI spec is gone.
func (n *kubeletNode) waitUnprepared(claimUID string) {
	n.poll(60*time.Second, "claim "+claimUID+" unprepared", func(context.Context) (bool, error) {
		st, err := driver.LoadState(n.stateFile)
		if err != nil {
			return false, err
		}
		_, prepared := st.Claims[types.UID(claimUID)]
		_, err = os.Stat(n.cdi.SpecPath(claimUID))
		return !prepared && errors.Is(err, fs.ErrNotExist), nil
	})
}
