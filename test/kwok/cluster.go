package kwok

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider/kwok"
	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/proc"
)

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Kwok configures the kwok controller (Kubeconfig is filled in).
	Kwok Options
	// Dir is the control plane's working folder; a temp folder if empty.
	Dir string
	// APIServerArgs are added to kube-apiserver's.
	APIServerArgs []string
	// ControllerManagerArgs are added to kube-controller-manager's (e.g.
	// --node-monitor-grace-period for rarer heartbeats).
	ControllerManagerArgs []string
}

// Cluster is a fleet test's cluster: a control plane with the node
// lifecycle controller, draxr-scheduler under its ServiceAccount, the
// kwok controller in this process, and draxr-autoscaler built, to start
// with StartAutoscaler.
type Cluster struct {
	CP   *controlplane.ControlPlane
	Kwok *Controller
	// Root is the repository; Bins holds draxr-scheduler and
	// draxr-autoscaler built from it.
	Root, Bins string
}

// StartCluster builds the control plane (make controlplane) and draxr's
// binaries, and starts them and kwok. On error everything started is
// stopped.
func StartCluster(ctx context.Context, opts ClusterOptions) (c *Cluster, err error) {
	c = &Cluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Root, err = controlplane.RepoRoot(); err != nil {
		return nil, err
	}
	binDir, err := controlplane.Build(c.Root)
	if err != nil {
		return nil, err
	}
	if c.Bins, err = os.MkdirTemp("", "draxr-kwok-bin"); err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", c.Bins+"/", "./scheduler/cmd/draxr-scheduler", "./autoscaler/cmd/draxr-autoscaler")
	build.Dir = c.Root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build draxr binaries: %v\n%s", err, out)
	}
	if c.CP, err = controlplane.Start(ctx, controlplane.Options{BinDir: binDir, Dir: opts.Dir, Controllers: Controllers(),
		APIServerArgs: opts.APIServerArgs, ControllerManagerArgs: opts.ControllerManagerArgs}); err != nil {
		return nil, err
	}
	if _, err := c.CP.StartScheduler(ctx, controlplane.SchedulerOptions{
		Binary: filepath.Join(c.Bins, "draxr-scheduler"), Config: filepath.Join(c.Root, "scheduler/deploy/scheduler-config.yaml"),
		RBAC: filepath.Join(c.Root, "scheduler/deploy/rbac.yaml"), ServiceAccount: "kube-system/draxr-scheduler",
	}); err != nil {
		return nil, err
	}
	kopts := opts.Kwok
	kopts.Kubeconfig = c.CP.AdminKubeconfig
	if c.Kwok, err = Start(ctx, kopts); err != nil {
		return nil, err
	}
	return c, nil
}

// Stop stops kwok, then every process of the control plane (by PID), and
// removes the binaries.
func (c *Cluster) Stop() {
	if c.Kwok != nil {
		c.Kwok.Stop()
	}
	if c.CP != nil {
		c.CP.Stop()
	}
	if c.Bins != "" {
		_ = os.RemoveAll(c.Bins)
	}
}

// Configure writes the kwok provider's ConfigMaps in namespace: config
// (kwok-provider-config's "config" document, as CA's samples) and the
// template nodes (kwok-provider-templates), replacing what was there.
func (c *Cluster) Configure(ctx context.Context, namespace, config string, templates ...*v1.Node) error {
	var docs []string
	for _, n := range templates {
		n = n.DeepCopy()
		n.APIVersion, n.Kind = "v1", "Node"
		b, err := yaml.Marshal(n)
		if err != nil {
			return err
		}
		docs = append(docs, string(b))
	}
	for name, data := range map[string]map[string]string{
		kwok.DefaultConfigName:    {kwok.ConfigKey: config},
		kwok.DefaultTemplatesName: {kwok.TemplatesKey: strings.Join(docs, "---\n")},
	} {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
		err := c.CP.Client.CoreV1().ConfigMaps(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := c.CP.Client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ConfigMap %s/%s: %w", namespace, name, err)
		}
	}
	return nil
}

// StartAutoscaler starts draxr-autoscaler --cloud-provider=kwok as its
// ServiceAccount (the shipped RBAC, autoscaler/deploy/rbac.yaml) with
// --namespace=kube-system and the given flags after the defaults; it
// serves /metrics on the returned address. Stop it with Process.Stop (the
// control plane's Stop stops it too).
func (c *Cluster) StartAutoscaler(ctx context.Context, name string, args ...string) (*proc.Process, string, error) {
	kubeconfig, err := c.CP.ServiceAccountKubeconfig(ctx, name, filepath.Join(c.Root, "autoscaler/deploy/rbac.yaml"), "kube-system/draxr-autoscaler")
	if err != nil {
		return nil, "", err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	all := append([]string{
		"--kubeconfig=" + kubeconfig, "--cloud-provider=kwok", "--namespace=kube-system",
		"--scheduler-config=" + filepath.Join(c.Root, "scheduler/deploy/scheduler-config.yaml"),
		"--address=" + addr, "--leader-elect=false", "--v=2",
	}, args...)
	p, err := c.CP.StartProcess(name, filepath.Join(c.Bins, "draxr-autoscaler"), all...)
	if err != nil {
		return nil, "", err
	}
	return p, addr, nil
}

// WaitFor polls cond every interval until it returns nil or timeout
// passes; the error says what was last wrong.
func WaitFor(ctx context.Context, timeout, interval time.Duration, what string, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %s: %w", what, timeout, last)
		case <-time.After(interval):
		}
	}
}
