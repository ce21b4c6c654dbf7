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
	"k8s.io/client-go/tools/clientcmd"
	basever "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/kubelet/driver"
	"draxr.dev/draxr/kubelet/inventory"
)

func main() {
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	klog.InitFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and the Kubernetes release it is built on, then exit")
	o, err := parse(fs, os.Args[1:])
	if *showVersion {
		// kubelet/ imports nothing of draxr's other folders: the release
		// component-base is from names the Kubernetes minor.
		fmt.Printf("draxr-example-driver, built on Kubernetes %s\n", basever.DefaultKubeBinaryVersion)
		return
	}
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "draxr-example-driver:", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	cfg        driver.Config
	paths      driver.KubeletPaths
	kubeconfig string
}

func parse(fs *flag.FlagSet, args []string) (options, error) {
	var (
		driverName = fs.String("driver-name", "gpu.example.com", "DRA driver name; also the CDI vendor")
		nodeName   = fs.String("node-name", os.Getenv("NODE_NAME"), "node this driver runs on (default $NODE_NAME)")
		kubeconfig = fs.String("kubeconfig", "", "kubeconfig file; in-cluster credentials if empty")
		kubeletDir = fs.String("kubelet-dir", "/var/lib/kubelet", "kubelet root directory (holds plugins_registry and plugins)")
		cdiDir     = fs.String("cdi-dir", "/var/run/cdi", "folder the container runtime reads CDI specs from")
		cdiClass   = fs.String("cdi-class", "gpu", "CDI class: device IDs read <driver-name>/<cdi-class>=<device>")
		stateFile  = fs.String("state-file", "", "file remembering prepared claims (default <kubelet-dir>/plugins/<driver-name>/prepared-claims.json)")
		invFlags   inventory.Flags
	)
	invFlags.AddFlags(fs, "")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	// Flags only: a stray word (a flag that lost its -) is not ignored.
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q: only flags are taken", fs.Arg(0))
	}
	inv, err := invFlags.Inventory()
	if err != nil {
		return options{}, err
	}
	o := options{paths: driver.PathsUnder(*kubeletDir, *driverName), kubeconfig: *kubeconfig}
	if *stateFile == "" {
		*stateFile = filepath.Join(o.paths.PluginDir, "prepared-claims.json")
	}
	o.cfg = driver.Config{DriverName: *driverName, NodeName: *nodeName, Inventory: inv,
		CDIDir: *cdiDir, CDIClass: *cdiClass, StateFile: *stateFile}
	return o, nil
}

func run(o options) error {
	d, err := driver.New(o.cfg)
	if err != nil {
		return err
	}
	client, err := newClient(o.kubeconfig)
	if err != nil {
		return err
	}
	// SIGTERM unregisters cleanly; a DaemonSet rollout relies on it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	running, err := driver.Start(ctx, d, client, o.paths)
	if err != nil {
		return err
	}
	return running.Wait()
}

// newClient connects with the kubeconfig file, or in-cluster credentials
// when it is "" (client-go's BuildConfigFromFlags falls back to them).
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
