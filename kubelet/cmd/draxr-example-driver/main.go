// Command draxr-example-driver is draxr's reference DRA driver: it
// publishes a configured device inventory as the node's ResourceSlices and
// prepares allocated devices as CDI devices (one spec file per claim in
// the CDI folder). Run it per node, as kubelet/deploy/daemonset.yaml does,
// or next to a draxr test node.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/kubelet/driver"
	"draxr.dev/draxr/kubelet/inventory"
)

func main() {
	klog.InitFlags(nil)
	var (
		driverName  = flag.String("driver-name", "gpu.example.com", "DRA driver name; also the CDI vendor")
		nodeName    = flag.String("node-name", os.Getenv("NODE_NAME"), "node this driver runs on (default $NODE_NAME)")
		kubeconfig  = flag.String("kubeconfig", "", "kubeconfig file; in-cluster credentials if empty")
		kubeletDir  = flag.String("kubelet-dir", "/var/lib/kubelet", "kubelet root directory (holds plugins_registry and plugins)")
		cdiDir      = flag.String("cdi-dir", "/var/run/cdi", "folder the container runtime reads CDI specs from")
		cdiClass    = flag.String("cdi-class", "gpu", "CDI class: device IDs read <driver-name>/<cdi-class>=<device>")
		stateFile   = flag.String("state-file", "", "file remembering prepared claims (default <kubelet-dir>/plugins/<driver-name>/prepared-claims.json)")
		invFile     = flag.String("inventory", "", "YAML file listing the devices (see kubelet/deploy/inventory.yaml); overrides --devices")
		count       = flag.Int("devices", 8, "without --inventory: number of devices <device-prefix>-0 ..")
		prefix      = flag.String("device-prefix", "gpu", "without --inventory: device name prefix")
		deviceModel = flag.String("device-model", "example", "without --inventory: value of the devices' model attribute")
	)
	flag.Parse()
	if err := run(*driverName, *nodeName, *kubeconfig, *kubeletDir, *cdiDir, *cdiClass, *stateFile, *invFile, *count, *prefix, *deviceModel); err != nil {
		fmt.Fprintln(os.Stderr, "draxr-example-driver:", err)
		os.Exit(1)
	}
}

func run(driverName, nodeName, kubeconfig, kubeletDir, cdiDir, cdiClass, stateFile, invFile string, count int, prefix, model string) error {
	inv := inventory.Uniform(prefix, count, model)
	if invFile != "" {
		var err error
		if inv, err = inventory.Load(invFile); err != nil {
			return err
		}
	}
	paths := driver.PathsUnder(kubeletDir, driverName)
	if stateFile == "" {
		stateFile = filepath.Join(paths.PluginDir, "prepared-claims.json")
	}
	d, err := driver.New(driver.Config{DriverName: driverName, NodeName: nodeName, Inventory: inv,
		CDIDir: cdiDir, CDIClass: cdiClass, StateFile: stateFile})
	if err != nil {
		return err
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// SIGTERM unregisters cleanly; a DaemonSet rollout relies on it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	running, err := driver.Start(ctx, d, client, paths)
	if err != nil {
		return err
	}
	return running.Wait()
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}
