// Command draxr-test-node runs one kubelet without a container runtime, for
// end-to-end and scale tests of DRA: the real kubelet code with kubemark's
// fakes, the kubelet's real DRA manager, and a fake CRI runtime that
// records the CDI devices every container receives (containers.jsonl in
// the root directory, see kubelet/testnode/nodefs). With --driver-name it
// also runs the reference DRA driver in the same process; otherwise start
// draxr-example-driver with --kubelet-dir pointing at this node's root
// directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	basever "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/kubelet/driver"
	"draxr.dev/draxr/kubelet/inventory"
	"draxr.dev/draxr/kubelet/testnode"
	"draxr.dev/draxr/kubelet/testnode/nodefs"
)

func main() {
	klog.InitFlags(nil)
	var (
		opts       testnode.Options
		labels     = flag.String("node-labels", "", "node labels, key=value,key=value")
		taints     = flag.String("register-with-taints", "", "taints, key=value:Effect,...")
		driverName = flag.String("driver-name", "", "run the reference DRA driver in-process under this name")
		invFlags   inventory.Flags
		cdiDir     = flag.String("cdi-dir", "", "in-process driver: CDI spec folder (default <root-dir>/cdi)")
		cdiClass   = flag.String("cdi-class", "gpu", "in-process driver: CDI class")
		version    = flag.Bool("version", false, "print the Kubernetes release the kubelet is built from, then exit")
	)
	invFlags.AddFlags(flag.CommandLine, "in-process driver: ")
	flag.StringVar(&opts.NodeName, "name", "", "node name")
	flag.StringVar(&opts.RootDir, "root-dir", "", "kubelet root directory (plugins_registry, CRI socket, containers.jsonl)")
	flag.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig for the kubelet (and the in-process driver)")
	flag.StringVar(&opts.ProviderID, "provider-id", "", "node spec.providerID (default kubemark://<name>)")
	flag.IntVar(&opts.MaxPods, "max-pods", 110, "pods the node accepts")
	flag.BoolVar(&opts.Stub, "stub-container-manager", false, "use kubemark's stock stub container manager: no DRA, devices are never prepared")
	flag.Parse()
	if *version {
		// kubelet/ imports nothing of draxr's other folders: the release
		// component-base is from names the Kubernetes minor.
		fmt.Printf("draxr-test-node, built on Kubernetes %s\n", basever.DefaultKubeBinaryVersion)
		return
	}

	err := func() error {
		// Flags only: a stray word (a flag that lost its -) is not ignored.
		if flag.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q: only flags are taken", flag.Arg(0))
		}
		var err error
		if opts.Labels, err = parseLabels(*labels); err != nil {
			return err
		}
		if opts.Taints, err = parseTaints(*taints); err != nil {
			return err
		}
		if *driverName != "" {
			inv, err := invFlags.Inventory()
			if err != nil {
				return err
			}
			dir := *cdiDir
			if dir == "" {
				dir = nodefs.DriverCDIDir(opts.RootDir)
			}
			opts.Driver = &driver.Config{DriverName: *driverName, Inventory: inv, CDIDir: dir, CDIClass: *cdiClass,
				StateFile: nodefs.DriverStateFile(opts.RootDir, *driverName)}
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return testnode.Run(ctx, opts)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "draxr-test-node:", err)
		os.Exit(1)
	}
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func parseTaints(s string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("taint %q: want key=value:Effect", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}
