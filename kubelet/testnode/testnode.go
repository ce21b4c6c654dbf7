// Package testnode runs a kubelet without a container runtime for
// end-to-end and scale tests: kubemark's hollow kubelet (the real kubelet
// code with fake cgroups, mounts and cAdvisor), a fake CRI runtime that
// records the CDI devices of every container, and, unless told otherwise,
// the kubelet's real DRA manager, so DRA drivers register through
// <root>/plugins_registry and claims are prepared before pods start.
//
// One node per process: the kubelet keeps process-wide state (feature
// gates, metrics, klog), and a process per node lets tests stop a node by
// its PID. A node takes about a second to start and well under 100 MB.
package testnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"

	"draxr.dev/draxr/kubelet/driver"
	"draxr.dev/draxr/kubelet/testnode/dracm"
	"draxr.dev/draxr/kubelet/testnode/nodefs"
	"draxr.dev/draxr/kubelet/testnode/recordingcri"
)

// Options configure a test node.
type Options struct {
	NodeName string
	// RootDir is the kubelet's root directory; it must exist or be
	// creatable. Drivers register in RootDir/plugins_registry. Keep it
	// short: unix socket paths under it are limited to 107 bytes.
	RootDir    string
	Kubeconfig string
	Labels     map[string]string
	Taints     []v1.Taint
	ProviderID string // kubemark://<name> if empty
	MaxPods    int    // 110 if 0
	// Stub uses kubemark's stock stub container manager with no DRA at
	// all. Only for showing that such a node runs pods without preparing
	// any device.
	Stub bool
	// Driver, if set, runs the reference DRA driver inside this process
	// against the node's plugins_registry; NodeName is filled in.
	Driver *driver.Config
}

// Run starts the node and blocks until ctx ends.
func Run(ctx context.Context, opts Options) error {
	logger := klog.FromContext(ctx)
	if opts.NodeName == "" || opts.RootDir == "" || opts.Kubeconfig == "" {
		return errors.New("node name, root dir and kubeconfig are required")
	}
	root, err := filepath.Abs(opts.RootDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return err
	}
	client, heartbeat, err := clients(opts.Kubeconfig)
	if err != nil {
		return err
	}

	rt, err := recordingcri.Start(filepath.Join(root, "cri.sock"), nodefs.RecordFile(root), initContainers(ctx, client))
	if err != nil {
		return fmt.Errorf("fake runtime: %w", err)
	}
	defer rt.Stop()
	tracer := noopoteltrace.NewTracerProvider()
	runtimeService, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(rt.Endpoint()).
		WithConnectionTimeout(15 * time.Second).WithTracerProvider(tracer).Build(ctx)
	if err != nil {
		return err
	}
	imageService, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(rt.Endpoint()).
		WithConnectionTimeout(15 * time.Second).WithTracerProvider(tracer).Build(ctx)
	if err != nil {
		return err
	}

	containerManager := cm.NewStubContainerManager()
	if !opts.Stub {
		if containerManager, err = dracm.New(logger, containerManager, client, root); err != nil {
			return err
		}
	}

	flags, config := kubeletConfig(opts, root)
	hollow := kubemark.NewHollowKubelet(flags, config, client, heartbeat,
		&cadvisortest.Fake{NodeName: opts.NodeName}, imageService, runtimeService, containerManager)
	server := &options.KubeletServer{KubeletFlags: *hollow.KubeletFlags, KubeletConfiguration: *hollow.KubeletConfiguration}
	if err := kubeletapp.RunKubelet(ctx, server, hollow.KubeletDeps); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	logger.Info("Test node kubelet started", "node", opts.NodeName, "rootDir", root, "dra", !opts.Stub)

	if opts.Driver != nil {
		cfg := *opts.Driver
		cfg.NodeName = opts.NodeName
		d, err := driver.New(cfg)
		if err != nil {
			return err
		}
		running, err := driver.Start(ctx, d, client, driver.PathsUnder(root, cfg.DriverName))
		if err != nil {
			return err
		}
		return running.Wait()
	}
	<-ctx.Done()
	return nil
}

// kubeletConfig starts from kubemark's hollow kubelet settings and moves
// everything onto this node's root directory and loopback. kubemark's
// helper makes its own /tmp/hollow-kubelet.* root, where drivers would
// never find the plugin registry; that folder is removed again.
func kubeletConfig(opts Options, root string) (*options.KubeletFlags, *kubeletconfig.KubeletConfiguration) {
	maxPods := opts.MaxPods
	if maxPods == 0 {
		maxPods = 110
	}
	flags, config := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName: opts.NodeName, MaxPods: maxPods, NodeLabels: opts.Labels, RegisterWithTaints: opts.Taints,
	})
	_ = os.RemoveAll(flags.RootDirectory)
	flags.RootDirectory = root
	config.StaticPodPath = ""
	config.PodLogsDir = filepath.Join(root, "pod-logs")
	// No kubelet API: nothing in the tests needs logs or exec, and a node
	// must listen on nothing but its unix sockets.
	config.EnableServer = false
	config.Address = "127.0.0.1"
	config.Port, config.ReadOnlyPort = 0, 0
	if opts.ProviderID != "" {
		config.ProviderID = opts.ProviderID
	}
	return flags, config
}

func clients(kubeconfig string) (client, heartbeat *clientset.Clientset, err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = "draxr-test-node"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = 20, 40
	if client, err = clientset.NewForConfig(cfg); err != nil {
		return nil, nil, err
	}
	// Heartbeats (lease, node status) are not rate limited and time out
	// quickly, like the kubelet's own heartbeat client.
	hb := *cfg
	hb.QPS, hb.Timeout = -1, 10*time.Second
	heartbeat, err = clientset.NewForConfig(&hb)
	return client, heartbeat, err
}

// initContainers reports the pod's non-sidecar init containers, read from
// the API server when the kubelet creates the container (the CRI request
// does not say which kind a container is).
func initContainers(ctx context.Context, client clientset.Interface) recordingcri.RunsToCompletion {
	return func(namespace, pod, container string) bool {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		p, err := client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			klog.FromContext(ctx).Error(err, "Fake runtime: cannot tell whether the container is an init container; it keeps running", "pod", klog.KRef(namespace, pod), "container", container)
			return false
		}
		for _, c := range p.Spec.InitContainers {
			if c.Name == container {
				return c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways
			}
		}
		return false
	}
}
