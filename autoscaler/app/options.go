package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/cloudprovider/kwok"
	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/scaledown"
)

// options are the command's flags.
type options struct {
	kubeconfig              string
	scanInterval            time.Duration
	expander                string
	expanderPriorities      string
	maxNodesTotal           int
	scaleDownEnabled        bool
	scaleDownUnneededTime   time.Duration
	scaleDownUtilization    float64
	scaleDownGpuUtilization float64
	utilizationIgnores      scaledown.UtilizationIgnores
	scaleDownDelayAfterAdd  time.Duration
	nodeGroupConfig         []string
	schedulerConfig         string
	cloudProvider           string
	// cloudConfig (--cloud-config) is the clusterapi provider's management
	// cluster kubeconfig, or the externalgrpc provider's YAML (the
	// service's address and TLS files); cloudConfigAuthoritative keeps an
	// empty clusterapi one from falling back to --kubeconfig (in-cluster
	// instead), as in CA.
	cloudConfig              string
	cloudConfigAuthoritative bool
	localNodeReadyDelay      time.Duration
	localSlicesDelay         time.Duration
	address                  string
	profiling                bool
	leaderElect              bool
	namespace                string
	statusConfigMap          string
	emitPerNodeGroupMetrics  bool
	leaderElectLeaseName     string
	// dryRun is --dry-run (shadow mode).
	dryRun                  bool
	leaderElectLeaseTimeout time.Duration

	// Failure model, health and leader election (options_failure.go).
	failureOptions
	scaleDownSafety
	limitOptions // options_limits.go
	loopOptions  // options_loop.go: frequent loops and event batching
	// ProvisioningRequests (options_provreq.go).
	provReqOptions

	// Cluster API provider (--cloud-provider=clusterapi).
	nodeGroupAutoDiscovery []string

	// CA's client, status, planning and leader-election flags
	// (options_ca.go).
	caOptions
}

// scaleDownSafety are CA's flags on which nodes may go and how they are
// removed (CA's names and defaults).
type scaleDownSafety struct {
	skipNodesWithLocalStorage         bool
	skipNodesWithSystemPods           bool
	skipNodesWithCustomControllerPods bool
	maxGracefulTerminationSec         int
	scaleDownDelayAfterDelete         time.Duration
	scaleDownDelayAfterFailure        time.Duration
	scaleDownUnreadyTime              time.Duration
	maxScaleDownParallelism           int
	maxDrainParallelism               int
	scaleDownSimulationTimeout        time.Duration
	maxBulkSoftTaintCount             int
	maxBulkSoftTaintTime              time.Duration
}

func (o *scaleDownSafety) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.skipNodesWithLocalStorage, "skip-nodes-with-local-storage", true,
		"if true, nodes with pods using local storage (emptyDir or hostPath, unless listed in the pod annotation cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes) are never removed")
	fs.BoolVar(&o.skipNodesWithSystemPods, "skip-nodes-with-system-pods", true,
		"if true, nodes with kube-system pods (except DaemonSet and mirror pods) that no PodDisruptionBudget covers are never removed")
	fs.BoolVar(&o.skipNodesWithCustomControllerPods, "skip-nodes-with-custom-controller-pods", true,
		"if true, nodes with pods owned by controllers other than ReplicaSet, StatefulSet, Job and ReplicationController are never removed")
	fs.IntVar(&o.maxGracefulTerminationSec, "max-graceful-termination-sec", 600,
		"maximum seconds to wait for evicted pods to terminate before the node is deleted")
	fs.DurationVar(&o.scaleDownDelayAfterDelete, "scale-down-delay-after-delete", 0,
		"how long after a node removal scale-down resumes")
	fs.DurationVar(&o.scaleDownDelayAfterFailure, "scale-down-delay-after-failure", 3*time.Minute,
		"how long after a failed node removal scale-down resumes")
	fs.DurationVar(&o.scaleDownUnreadyTime, "scale-down-unready-time", 20*time.Minute,
		"how long a node must be unready before it is removed")
	fs.IntVar(&o.maxScaleDownParallelism, "max-scale-down-parallelism", 10,
		"maximum number of nodes (empty or needing a drain) removed at the same time; with --scale-down-unneeded-time and --scan-interval it also bounds how many unneeded nodes a loop looks for, as in CA")
	fs.IntVar(&o.maxDrainParallelism, "max-drain-parallelism", 1,
		"maximum number of nodes needing a drain removed at the same time")
	fs.IntVar(&o.maxBulkSoftTaintCount, "max-bulk-soft-taint-count", 10,
		"maximum number of nodes whose DeletionCandidateOfClusterAutoscaler taint one loop adds or removes (removals first; the rest in later loops); 0 turns the taint off")
	fs.DurationVar(&o.maxBulkSoftTaintTime, "max-bulk-soft-taint-time", 3*time.Second,
		"maximum time one loop spends adding or removing DeletionCandidateOfClusterAutoscaler taints")
	fs.DurationVar(&o.scaleDownSimulationTimeout, "scale-down-simulation-timeout", 30*time.Second,
		"how long one loop may spend looking for removable nodes; the candidates left are looked at in a later loop")
}

func (o *scaleDownSafety) validate() error {
	switch {
	case o.maxGracefulTerminationSec < 0:
		return fmt.Errorf("--max-graceful-termination-sec must be >= 0, got %d", o.maxGracefulTerminationSec)
	case o.scaleDownDelayAfterDelete < 0:
		return fmt.Errorf("--scale-down-delay-after-delete must be >= 0, got %s", o.scaleDownDelayAfterDelete)
	case o.scaleDownDelayAfterFailure < 0:
		return fmt.Errorf("--scale-down-delay-after-failure must be >= 0, got %s", o.scaleDownDelayAfterFailure)
	case o.scaleDownUnreadyTime < 0:
		return fmt.Errorf("--scale-down-unready-time must be >= 0, got %s", o.scaleDownUnreadyTime)
	case o.maxScaleDownParallelism < 1:
		return fmt.Errorf("--max-scale-down-parallelism must be >= 1, got %d", o.maxScaleDownParallelism)
	case o.maxDrainParallelism < 1:
		return fmt.Errorf("--max-drain-parallelism must be >= 1, got %d", o.maxDrainParallelism)
	case o.maxBulkSoftTaintCount < 0:
		return fmt.Errorf("--max-bulk-soft-taint-count must be >= 0, got %d", o.maxBulkSoftTaintCount)
	case o.maxBulkSoftTaintTime < 0:
		return fmt.Errorf("--max-bulk-soft-taint-time must be >= 0, got %s", o.maxBulkSoftTaintTime)
	case o.scaleDownSimulationTimeout <= 0:
		return fmt.Errorf("--scale-down-simulation-timeout must be positive, got %s", o.scaleDownSimulationTimeout)
	}
	return nil
}

// actuation is the loop's view of these flags.
func (o *scaleDownSafety) actuation() core.ScaleDownActuation {
	return core.ScaleDownActuation{
		Drainability: drainability.Options{SkipNodesWithLocalStorage: o.skipNodesWithLocalStorage,
			SkipNodesWithSystemPods: o.skipNodesWithSystemPods, SkipNodesWithCustomControllerPods: o.skipNodesWithCustomControllerPods},
		DelayAfterDelete: o.scaleDownDelayAfterDelete, DelayAfterFailure: o.scaleDownDelayAfterFailure,
		UnreadyTime:             o.scaleDownUnreadyTime,
		MaxScaleDownParallelism: o.maxScaleDownParallelism, MaxDrainParallelism: o.maxDrainParallelism,
		MaxBulkSoftTaintCount: softTaintCount(o.maxBulkSoftTaintCount, o.maxBulkSoftTaintTime), MaxBulkSoftTaintTime: o.maxBulkSoftTaintTime,
		MaxGracefulTermination: time.Duration(o.maxGracefulTerminationSec) * time.Second,
	}
}

// softTaintCount is the loop's soft-taint budget: CA's flags at 0 (count
// or time) taint no node, which the core takes as a negative count.
func softTaintCount(count int, limit time.Duration) int {
	if count == 0 || limit == 0 {
		return -1
	}
	return count
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.DurationVar(&o.scanInterval, "scan-interval", 10*time.Second, "how often the cluster is reevaluated")
	fs.StringVar(&o.expander, "expander", "least-waste", fmt.Sprintf("node group choice: one of %v, or a comma-separated chain applied in order as filters (random only last), e.g. priority,least-waste", expander.Names()))
	fs.StringVar(&o.expanderPriorities, "expander-priorities", "",
		"priority expander config file (priority: [regexps matching whole group names]); without it the priority expander reads "+
			"the Cluster Autoscaler's ConfigMap cluster-autoscaler-priority-expander (key priorities) in --namespace at every choice")
	fs.IntVar(&o.maxNodesTotal, "max-nodes-total", 0, "maximum number of nodes in all node groups, 0 for no limit")
	fs.BoolVar(&o.scaleDownEnabled, "scale-down-enabled", true, "whether to remove unneeded nodes")
	fs.DurationVar(&o.scaleDownUnneededTime, "scale-down-unneeded-time", 10*time.Minute, "how long a node must be unneeded before it is removed")
	fs.Float64Var(&o.scaleDownUtilization, "scale-down-utilization-threshold", 0.5,
		"nodes used below this share (of their DRA devices where they have any, else of CPU and memory) may be removed")
	fs.Float64Var(&o.scaleDownGpuUtilization, "scale-down-gpu-utilization-threshold", 0.5,
		"the same for nodes that publish DRA devices (their utilization is the share of their devices in use)")
	fs.BoolVar(&o.utilizationIgnores.DaemonSetPods, "ignore-daemonsets-utilization", false,
		"leave DaemonSet pods out of a node's CPU and memory utilization for scale-down (their requests count neither as used nor as the node's)")
	fs.BoolVar(&o.utilizationIgnores.MirrorPods, "ignore-mirror-pods-utilization", false,
		"leave mirror (static) pods out of a node's CPU and memory utilization for scale-down, likewise")
	fs.DurationVar(&o.scaleDownDelayAfterAdd, "scale-down-delay-after-add", 10*time.Minute, "how long after a scale-up scale-down resumes")
	fs.StringArrayVar(&o.nodeGroupConfig, "node-group-config", nil, "file or folder of NodeGroup objects (draxr.dev/v1alpha1), repeatable")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration, so simulations place pods as it does")
	fs.StringVar(&o.cloudProvider, "cloud-provider", "local", "cloud provider: local (nodes as API objects, for tests and demos), "+
		"kwok (CA's kwok provider: groups from the kwok-provider-config ConfigMap in $POD_NAMESPACE or --namespace, fake nodes the kwok controller runs), clusterapi, "+
		"or externalgrpc (a provider service speaking CA's externalgrpc protocol, e.g. CA's own for any cloud it supports; see docs/externalgrpc.md)")
	fs.StringVar(&o.cloudConfig, "cloud-config", "", "clusterapi: kubeconfig of the management cluster (its Cluster API objects) when it is not the --kubeconfig cluster; "+
		"without it, the --kubeconfig cluster (or in-cluster, with --clusterapi-cloud-config-authoritative). "+
		"externalgrpc (required): CA's YAML file with the service's address, key, cert, cacert (mTLS) and grpc_timeout, "+
		"and draxr's optional template_slices_config_map")
	fs.BoolVar(&o.cloudConfigAuthoritative, "clusterapi-cloud-config-authoritative", false,
		"clusterapi: an empty --cloud-config means the in-cluster configuration for the management cluster, never --kubeconfig")
	fs.DurationVar(&o.localNodeReadyDelay, "local-node-ready-delay", 5*time.Second, "local provider: time until a new node is Ready")
	fs.DurationVar(&o.localSlicesDelay, "local-slices-delay", 3*time.Second, "local provider: time from Ready until the node's ResourceSlices are published")
	fs.StringVar(&o.address, "address", ":8085", "address for /metrics and /health-check (also /healthz)")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on --address")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding the leader lease")
	fs.StringVar(&o.namespace, "namespace", "kube-system", "namespace of the leader lease and the status ConfigMap")
	fs.StringVar(&o.statusConfigMap, "status-config-map-name", core.DefaultStatusConfigMapName, "status ConfigMap name (CA's schema), empty to disable")
	fs.BoolVar(&o.emitPerNodeGroupMetrics, "emit-per-nodegroup-metrics", false,
		"if true, emit CA's per node group metrics (node_group_min_count, _max_count, _target_count, _healthiness, _backoff_status)")
	fs.StringVar(&o.leaderElectLeaseName, "leader-elect-resource-name", "draxr-autoscaler", "leader lease name")
	fs.BoolVar(&o.dryRun, "dry-run", false,
		"shadow mode: run the whole loop and change nothing (no scale-up, taint, eviction or deletion); publish what it would do "+
			"in its own status ConfigMap ("+core.DryRunStatusConfigMapName+" unless --status-config-map-name is given), "+
			"as events on it and in the metrics (draxr_autoscaler_dry_run 1); its lease is "+dryRunLease+" unless --leader-elect-resource-name is given")
	fs.DurationVar(&o.leaderElectLeaseTimeout, "leader-elect-lease-duration", 15*time.Second, "leader lease duration")
	o.failureOptions.addFlags(fs)
	o.scaleDownSafety.addFlags(fs)
	o.limitOptions.addFlags(fs)
	o.loopOptions.addFlags(fs)
	o.provReqOptions.addFlags(fs)
	o.addClusterAPIFlags(fs)
	o.caOptions.addFlags(fs, &o.schedulerConfig)
}

// addClusterAPIFlags adds the clusterapi provider's flags, as CA names them.
func (o *options) addClusterAPIFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.nodeGroupAutoDiscovery, "node-group-auto-discovery", nil,
		"clusterapi provider: which MachineDeployments/MachineSets/MachinePools are node groups, "+
			"<discoverer>:[<key>[=<value>]] e.g. clusterapi:namespace=x,clusterName=y,<label>=<value>; repeatable")
}

// dryRunLease is a dry run's lease: it runs beside the acting
// autoscaler, never instead of it.
const dryRunLease = "draxr-autoscaler-dry-run"

// dryRunDefaults gives a dry run its own status ConfigMap and lease,
// unless they were named: beside the acting autoscaler it must neither
// overwrite that one's status nor take its lease.
func (o *options) dryRunDefaults(fs *pflag.FlagSet) {
	if !o.dryRun {
		return
	}
	if !fs.Changed("status-config-map-name") {
		o.statusConfigMap = core.DryRunStatusConfigMapName
	}
	if !fs.Changed("leader-elect-resource-name") {
		o.leaderElectLeaseName = dryRunLease
	}
}

// validateCloudProvider checks the provider choice and its flags.
func (o *options) validateCloudProvider() error {
	switch o.cloudProvider {
	case "local":
		if len(o.nodeGroupConfig) == 0 {
			return fmt.Errorf("--node-group-config is required: the local provider's NodeGroup objects")
		}
		if o.cloudConfig != "" || o.cloudConfigAuthoritative {
			return fmt.Errorf("--cloud-config and --clusterapi-cloud-config-authoritative need --cloud-provider=%s (--cloud-config also %s); the local provider reads --node-group-config",
				clusterapi.Name, externalgrpc.Name)
		}
		if len(o.nodeGroupAutoDiscovery) > 0 {
			return fmt.Errorf("--node-group-auto-discovery needs --cloud-provider=%s", clusterapi.Name)
		}
	case kwok.Name:
		if len(o.nodeGroupConfig) > 0 {
			return fmt.Errorf("--node-group-config is for the local provider; the kwok provider reads node groups from its ConfigMap %s", kwok.DefaultConfigName)
		}
		if o.cloudConfig != "" || o.cloudConfigAuthoritative {
			return fmt.Errorf("--cloud-config and --clusterapi-cloud-config-authoritative need --cloud-provider=%s; the kwok provider reads its ConfigMap %s", clusterapi.Name, kwok.DefaultConfigName)
		}
		if len(o.nodeGroupAutoDiscovery) > 0 {
			return fmt.Errorf("--node-group-auto-discovery needs --cloud-provider=%s", clusterapi.Name)
		}
	case clusterapi.Name:
		if len(o.nodeGroupConfig) > 0 {
			return fmt.Errorf("--node-group-config is for the local provider; the clusterapi provider reads node groups from the cluster")
		}
		if _, err := clusterapi.ParseAutoDiscovery(o.nodeGroupAutoDiscovery); err != nil {
			return err
		}
	case externalgrpc.Name:
		switch {
		case o.cloudConfig == "":
			return fmt.Errorf("--cloud-config is required with --cloud-provider=%s: the YAML file with the provider service's address (and TLS files)", externalgrpc.Name)
		case len(o.nodeGroupConfig) > 0:
			return fmt.Errorf("--node-group-config is for the local provider; the %s provider's service lists the node groups", externalgrpc.Name)
		case len(o.nodeGroupAutoDiscovery) > 0:
			return fmt.Errorf("--node-group-auto-discovery needs --cloud-provider=%s; give it to the %s provider service instead", clusterapi.Name, externalgrpc.Name)
		case o.cloudConfigAuthoritative:
			return fmt.Errorf("--clusterapi-cloud-config-authoritative needs --cloud-provider=%s", clusterapi.Name)
		}
	default:
		return fmt.Errorf("--cloud-provider %q is not supported (supported: local, %s, %s, %s)", o.cloudProvider, kwok.Name, clusterapi.Name, externalgrpc.Name)
	}
	return nil
}

func (o *options) validate() error {
	switch {
	case o.scanInterval <= 0:
		return fmt.Errorf("--scan-interval must be positive, got %s", o.scanInterval)
	case o.maxNodesTotal < 0:
		return fmt.Errorf("--max-nodes-total must be >= 0, got %d", o.maxNodesTotal)
	case o.scaleDownUtilization < 0 || o.scaleDownUtilization > 1:
		return fmt.Errorf("--scale-down-utilization-threshold must be within [0, 1], got %g", o.scaleDownUtilization)
	case o.scaleDownGpuUtilization < 0 || o.scaleDownGpuUtilization > 1:
		return fmt.Errorf("--scale-down-gpu-utilization-threshold must be within [0, 1], got %g", o.scaleDownGpuUtilization)
	}
	if err := o.scaleDownSafety.validate(); err != nil {
		return err
	}
	if err := o.limitOptions.validate(); err != nil {
		return err
	}
	if err := o.loopOptions.validate(o.scanInterval); err != nil {
		return err
	}
	if err := o.provReqOptions.validate(); err != nil {
		return err
	}
	if err := o.failureOptions.validate(o.leaderElectLeaseTimeout); err != nil {
		return err
	}
	if err := o.caOptions.validate(); err != nil {
		return err
	}
	return o.validateCloudProvider()
}
