package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/simulator/input"
)

// globalFlags are the connection flags every command shares. They are
// kubectl's own (genericclioptions), so `kubectl draxr` takes the same
// --kubeconfig, --context and -n as kubectl.
type globalFlags struct {
	kube *genericclioptions.ConfigFlags
	// qps and burst are CA's --kube-client-qps and --kube-client-burst.
	qps   float32
	burst int
	// syncTimeout bounds the initial list of every informer.
	syncTimeout time.Duration
	// asPlugin is set when run as kubectl-draxr: a kubectl plugin reads
	// the cluster unless told to read files.
	asPlugin bool
}

func (g *globalFlags) add(fs *pflag.FlagSet) {
	g.kube = genericclioptions.NewConfigFlags(true)
	g.kube.AddFlags(fs)
	fs.Float32Var(&g.qps, "kube-client-qps", 5, "QPS of the client talking to the API server")
	fs.IntVar(&g.burst, "kube-client-burst", 10, "burst of the client talking to the API server")
	fs.DurationVar(&g.syncTimeout, "sync-timeout", 2*time.Minute, "how long reading the cluster may take")
}

// live reports whether the command reads the cluster instead of files:
// any flag that selects a cluster switches to it.
func (g *globalFlags) live(cmd *cobra.Command) bool {
	for _, name := range []string{"kubeconfig", "context", "cluster", "user", "server", "token"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return true
		}
	}
	// As kubectl draxr, or with a kubeconfig in $KUBECONFIG, the cluster
	// is what to plan unless files are given: the built-in example is
	// never planned in its place silently.
	if g.asPlugin || os.Getenv("KUBECONFIG") != "" {
		f := cmd.Flags().Lookup("filename")
		return f == nil || !f.Changed
	}
	return false
}

// read lists and watches the cluster read-only until the caches are
// synced and returns what they hold.
func (g *globalFlags) read(ctx context.Context, groups groupsFunc) (*input.Objects, error) {
	client, cfg, err := g.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.syncTimeout)
	defer cancel()
	objs, err := liveview.Read(ctx, client, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Host, err)
	}
	if err := groups(ctx, client, cfg, objs); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Host, err)
	}
	return objs, nil
}

// groupsFunc adds the node groups of a provider that reads the cluster
// (Cluster API's) to what was read of it.
type groupsFunc func(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, objs *input.Objects) error

// watch calls fn with what the cluster holds, then again after changes,
// until ctx ends.
func (g *globalFlags) watch(ctx context.Context, quiet time.Duration, groups groupsFunc, fn func(*input.Objects) error) error {
	client, cfg, err := g.client()
	if err != nil {
		return err
	}
	err = liveview.Watch(ctx, client, cfg, g.syncTimeout, quiet, func(objs *input.Objects) error {
		if err := groups(ctx, client, cfg, objs); err != nil {
			return err
		}
		return fn(objs)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Host, err)
	}
	return nil
}

// client builds a read-only client from kubectl's flags and checks that
// the server answers.
func (g *globalFlags) client() (kubernetes.Interface, *rest.Config, error) {
	if g.qps <= 0 || g.burst <= 0 {
		return nil, nil, badInput(fmt.Errorf("--kube-client-qps and --kube-client-burst must be > 0, got %v and %d", g.qps, g.burst))
	}
	cfg, err := g.restConfig()
	if err != nil {
		return nil, nil, badInput(err)
	}
	cfg.QPS, cfg.Burst = g.qps, g.burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("kubeconfig: %w", err))
	}
	// One request first, so that an unreachable or refusing server fails
	// at once rather than after the informers' retries.
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cfg.Host, err)
	}
	return client, cfg, nil
}

// restConfig is the client configuration kubectl's flags select.
func (g *globalFlags) restConfig() (*rest.Config, error) {
	raw, err := g.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// Without any configuration client-go falls back to localhost:8080;
	// say what is missing instead of timing out there.
	if len(raw.Clusters) == 0 && *g.kube.APIServer == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, fmt.Errorf("no kubeconfig found: give --kubeconfig, set KUBECONFIG, or run in a pod; or read files with -f")
	}
	cfg, err := g.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "draxr"
	return cfg, nil
}

// namespace is -n when given: the namespace whose pods and claims a
// command reports on. "" means all.
func (g *globalFlags) namespace(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed && g.kube.Namespace != nil {
		return *g.kube.Namespace
	}
	return ""
}
