package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/examples"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaleup"
)

type commonFlags struct {
	global          *globalFlags
	files           []string
	nodeGroupConfig []string
	output          string
	maxPods         int64
	provider        providerFlags
	// scaleDown is set by commands that can explain scale-down; explainer
	// is built by load when it is asked for.
	scaleDown *scaleDownFlags
	explainer explainer
	// liveClients are the clients load read the cluster with.
	liveClients *liveClients
}

type liveClients struct {
	kube kubernetes.Interface
	// capi is how the clusterapi provider reads the cluster, nil when it
	// does not.
	capi *clusterapi.Source
}

func (c *commonFlags) add(cmd *cobra.Command, g *globalFlags) {
	c.global = g
	cmd.Flags().StringArrayVarP(&c.files, "filename", "f", nil,
		"file or directory of YAML/JSON objects (repeatable), - for stdin; none: the built-in example, or the cluster with --kubeconfig/--context")
	cmd.Flags().StringArrayVar(&c.nodeGroupConfig, "node-group-config", nil,
		"with a live cluster: file or folder of NodeGroup objects (draxr.dev/v1alpha1), repeatable")
	cmd.Flags().StringVarP(&c.output, "output", "o", "table", "output format: "+strings.Join(report.Formats(), "|"))
	c.provider.add(cmd.Flags())
	cmd.Flags().Int64Var(&c.maxPods, "max-pods", input.DefaultMaxPods,
		"most pods all workloads in the input may expand to together (the default keeps a run within about 2 GiB)")
	completeWith(cmd, "output", fixedValues(report.Formats(), false))
	markFiles(cmd, "filename", "node-group-config")
}

func (c *commonFlags) load(cmd *cobra.Command) (*input.Objects, error) {
	if !validFormat(c.output) {
		return nil, badInput(fmt.Errorf("-o: unknown output format %q (want one of %s)", c.output, strings.Join(report.Formats(), ", ")))
	}
	if c.maxPods <= 0 {
		return nil, badInput(fmt.Errorf("--max-pods: must be > 0, got %d", c.maxPods))
	}
	if err := c.provider.check(); err != nil {
		return nil, badInput(err)
	}
	opts := input.Options{MaxPods: c.maxPods}
	if c.global.live(cmd) {
		if len(c.files) > 0 {
			return nil, badInput(fmt.Errorf("-f reads files and --kubeconfig/--context a cluster: give one of them"))
		}
		objs, err := c.global.read(cmd.Context(), c.liveGroups(cmd))
		if err != nil {
			return nil, err
		}
		groups, err := loadNodeGroups(c.nodeGroupConfig)
		if err != nil {
			return nil, badInput(err)
		}
		objs.NodeGroups = append(objs.NodeGroups, groups...)
		if c.scaleDown != nil && c.scaleDown.enabled && c.liveClients != nil {
			c.explainer = c.scaleDown.liveExplainer(c.liveClients.kube, c.liveClients.capi, &c.provider, groups)
		}
		return objs, nil
	}
	if len(c.nodeGroupConfig) > 0 {
		return nil, badInput(fmt.Errorf("--node-group-config is for a live cluster (--kubeconfig/--context); with files, put NodeGroups in -f"))
	}
	var objs *input.Objects
	var err error
	if len(c.files) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "planning the built-in example (no -f, no cluster)")
		objs, err = opts.Parse(examples.Builtin, examples.BuiltinName)
	} else {
		objs, err = interruptible(cmd.Context(), func() (*input.Objects, error) { return opts.LoadPaths(c.files) })
	}
	if err != nil {
		return nil, badInput(err)
	}
	if c.scaleDown != nil && c.scaleDown.enabled {
		raw := asRead(objs)
		c.explainer = c.scaleDown.dumpExplainer(raw, raw.NodeGroups, &c.provider)
	}
	if err := c.provider.dumpGroups(cmd.Context(), objs); err != nil {
		return nil, badInput(err)
	}
	if s := objs.SkippedSummary(); s != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), s)
	}
	return objs, nil
}

// interruptible returns fn's result, or ctx's error as soon as ctx ends:
// reading files (a dump of 100,000 pods takes seconds, stdin may never
// end) cannot be cancelled, and an interrupted command returns at once
// and ends the process rather than wait for it.
func interruptible[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// liveGroups adds the groups the configured provider reads from the
// cluster.
func (c *commonFlags) liveGroups(cmd *cobra.Command) groupsFunc {
	return func(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, objs *input.Objects) error {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		c.liveClients = &liveClients{kube: client, capi: c.provider.liveSource(client, dyn)}
		return c.provider.liveGroups(ctx, c.liveClients.capi, objs, cmd.ErrOrStderr())
	}
}

// watch calls fn with the live cluster's objects, and again after every
// change, until the command's context ends.
func (c *commonFlags) watch(cmd *cobra.Command, quiet time.Duration, fn func(*input.Objects) error) error {
	if !validFormat(c.output) {
		return badInput(fmt.Errorf("-o: unknown output format %q (want one of %s)", c.output, strings.Join(report.Formats(), ", ")))
	}
	if !c.global.live(cmd) || len(c.files) > 0 {
		return badInput(fmt.Errorf("--watch follows a live cluster (--kubeconfig/--context), not files"))
	}
	if quiet <= 0 {
		return badInput(fmt.Errorf("--watch-quiet-period: must be > 0, got %v", quiet))
	}
	if err := c.provider.check(); err != nil {
		return badInput(err)
	}
	groups, err := loadNodeGroups(c.nodeGroupConfig)
	if err != nil {
		return badInput(err)
	}
	return c.global.watch(cmd.Context(), quiet, c.liveGroups(cmd), func(objs *input.Objects) error {
		objs.NodeGroups = append(objs.NodeGroups, groups...)
		return fn(objs)
	})
}

// loadNodeGroups reads --node-group-config: NodeGroup objects only, since
// everything else comes from the cluster.
func loadNodeGroups(paths []string) ([]*nodegroup.NodeGroup, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	objs, err := input.LoadPaths(paths)
	if err != nil {
		return nil, fmt.Errorf("--node-group-config: %w", err)
	}
	if n := len(objs.Nodes) + len(objs.RunningPods) + len(objs.PendingPods) + len(objs.ResourceSlices) +
		len(objs.DeviceClasses) + len(objs.ResourceClaims) + len(objs.ResourceClaimTemplates); n > 0 {
		return nil, fmt.Errorf("--node-group-config %s: holds %d objects other than NodeGroups; the cluster provides those", strings.Join(paths, ", "), n)
	}
	return objs.NodeGroups, nil
}

func validFormat(f string) bool {
	for _, ok := range report.Formats() {
		if f == ok {
			return true
		}
	}
	return false
}

// simulateFlags are draxr simulate's flags, the common ones among them.
type simulateFlags struct {
	c                                         commonFlags
	schedulerConfig, expanderName, priorities string
	maxNodesTotal                             int
	limitFlags                                limits.Flags
	watch                                     bool
	watchQuiet                                time.Duration
	pods                                      scaleup.Flags
	sd                                        scaleDownFlags
	processorInstance                         string
	requestBackoff                            time.Duration
}

func newSimulateCommand(g *globalFlags) *cobra.Command {
	s := &simulateFlags{}
	s.c.scaleDown = &s.sd
	cmd := &cobra.Command{
		Use:   "simulate [-f FILE|DIR]... | --kubeconfig FILE [--node-group-config FILE]...",
		Short: "Plan which node groups grow for the pending pods, and explain every pod left out",
		Example: exampleText(g.asPlugin, `
# Plan a cluster dump for the NodeGroups that may grow
draxr simulate -f cluster.yaml -f nodegroups.yaml

# Plan from stdin, as JSON, choosing groups by priority, then least waste
kubectl get nodes,pods,resourceslices,deviceclasses -A -o yaml | draxr simulate -f - -f nodegroups.yaml -o json --expander priority,least-waste --expander-priorities priorities.yaml

# Plan the live cluster again whenever it changes
draxr simulate --context prod --node-group-config nodegroups.yaml --watch

# Plan the pending pods of namespace ml, and say which nodes scale-down would remove
draxr simulate -f cluster.yaml -n ml --scale-down`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return s.run(cmd, g) },
	}
	s.addFlags(cmd, g)
	return cmd
}

func (s *simulateFlags) addFlags(cmd *cobra.Command, g *globalFlags) {
	cmd.Flags().BoolVarP(&s.watch, "watch", "w", false, "with a live cluster: plan again whenever the cluster changes, printing each new plan")
	cmd.Flags().DurationVar(&s.watchQuiet, "watch-quiet-period", 5*time.Second, "with --watch: plan again once the cluster has not changed for this long")
	s.c.add(cmd, g)
	cmd.Flags().StringVar(&s.schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration file (default: kube-scheduler's default profile)")
	cmd.Flags().StringVar(&s.expanderName, "expander", "least-waste", "node group choice: "+strings.Join(expander.Names(), "|")+", or a comma-separated chain such as priority,least-waste")
	cmd.Flags().StringVar(&s.priorities, "expander-priorities", "", "priority expander config: YAML map of priority to group-name regexps")
	cmd.Flags().IntVar(&s.maxNodesTotal, "max-nodes-total", 0, "cap on all nodes in the cluster, 0 for none")
	s.limitFlags.AddFlags(cmd.Flags())
	s.pods.AddFlags(cmd.Flags())
	s.sd.add(cmd.Flags())
	cmd.Flags().StringVar(&s.processorInstance, "check-capacity-processor-instance", "",
		"plan the ProvisioningRequests of this check-capacity processor instance, as draxr-autoscaler with the flag serves them")
	cmd.Flags().DurationVar(&s.requestBackoff, "provisioning-request-initial-backoff-time", provisioning.DefaultInitialBackoff,
		"a ProvisioningRequest not provisioned is tried again once its last try is this old")
	completeWith(cmd, "expander", fixedValues(expander.Names(), true))
	markFiles(cmd, "scheduler-config", "expander-priorities")
}

// run prints one plan, or with --watch a plan per change.
func (s *simulateFlags) run(cmd *cobra.Command, g *globalFlags) error {
	opts, err := s.options()
	if err != nil {
		return err
	}
	plan := func(objs *input.Objects) ([]byte, error) { return s.plan(cmd, g, objs, opts) }
	if !s.watch {
		objs, err := s.c.load(cmd)
		if err != nil {
			return err
		}
		out, err := plan(objs)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(out)
		return err
	}
	if s.sd.enabled {
		return badInput(fmt.Errorf("--scale-down answers for one reading of the cluster; leave out --watch"))
	}
	// --watch prints a plan when it differs from the last one.
	var last []byte
	return s.c.watch(cmd, s.watchQuiet, func(objs *input.Objects) error {
		out, err := plan(objs)
		if err != nil || bytes.Equal(out, last) {
			return err
		}
		if last != nil && s.c.output != "json" {
			fmt.Fprintln(cmd.OutOrStdout(), "---")
		}
		last = out
		_, err = cmd.OutOrStdout().Write(out)
		return err
	})
}

// options are the simulation's options from the flags; a bad flag is the
// user's input error.
func (s *simulateFlags) options() (offline.Options, error) {
	// The requests are decided by the loop's own step, over the dump.
	opts := offline.Options{MaxNodesTotal: s.maxNodesTotal, Pods: &s.pods,
		Requests: provisioning.OfflineStep(s.processorInstance, s.requestBackoff)}
	if s.maxNodesTotal < 0 {
		return opts, badInput(fmt.Errorf("--max-nodes-total: must be >= 0, got %d", s.maxNodesTotal))
	}
	var err error
	if opts.Limits, err = s.limitFlags.Options(); err != nil {
		return opts, badInput(err)
	}
	if s.schedulerConfig != "" {
		if opts.Profile, err = placement.LoadProfile(s.schedulerConfig, ""); err != nil {
			return opts, badInput(err)
		}
	}
	if opts.Expander, err = expander.NewFromFile(s.expanderName, s.priorities, 1); err != nil {
		return opts, badInput(err)
	}
	return opts, nil
}

// plan is the report of one simulation of objs, in the -o format.
func (s *simulateFlags) plan(cmd *cobra.Command, g *globalFlags, objs *input.Objects, opts offline.Options) ([]byte, error) {
	// -n plans the namespace's pending pods; pods everywhere
	// still take room on the nodes.
	if ns := g.namespace(cmd); ns != "" {
		var pending []*v1.Pod
		for _, p := range objs.PendingPods {
			if p.Namespace == ns {
				pending = append(pending, p)
			}
		}
		objs.PendingPods = pending
	}
	res, err := offline.Simulate(cmd.Context(), objs, opts)
	if err != nil {
		return nil, err
	}
	out := report.NewSimulateOutput(res.Plan, res.ClassErrors)
	out.ProvisioningRequests = res.ProvisioningRequests
	out.Warnings = res.Warnings
	out.CapacityBuffers = res.CapacityBuffers
	out.FeatureGates = featureGatesSet(cmd)
	if s.c.explainer != nil {
		if out.ScaleDown, err = s.c.explainer(cmd.Context()); err != nil {
			return nil, fmt.Errorf("scale-down: %w", err)
		}
	}
	var buf bytes.Buffer
	err = report.Write(&buf, s.c.output, out, func(w ioWriter) error { return report.PlanTable(w, out) })
	return buf.Bytes(), err
}

func newCapacityCommand(g *globalFlags) *cobra.Command {
	var c commonFlags
	cmd := &cobra.Command{
		Use:   "capacity [-f FILE|DIR]... | --kubeconfig FILE",
		Short: "Show devices per DeviceClass and extended resource name: total, allocated, free, tainted",
		Example: exampleText(g.asPlugin, `
# Devices per DeviceClass and extended resource name in a dump
draxr capacity -f cluster.yaml

# The same for a kubeconfig context's cluster, as YAML
draxr capacity --context prod -o yaml`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.namespace(cmd) != "" {
				return badInput(fmt.Errorf("-n: capacity counts devices cluster-wide; DeviceClasses and ResourceSlices have no namespace"))
			}
			objs, err := c.load(cmd)
			if err != nil {
				return err
			}
			snap, err := objs.Snapshot(nil)
			if err != nil {
				return badInput(err)
			}
			r := capacity.Compute(snap, dynres.NewMatcher())
			return report.Write(cmd.OutOrStdout(), c.output, report.NewCapacityOutput(r), func(w ioWriter) error { return report.CapacityTable(w, r) })
		},
	}
	c.add(cmd, g)
	return cmd
}
