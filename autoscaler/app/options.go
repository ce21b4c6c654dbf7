package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/simulator/expander"
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
	scaleDownDelayAfterAdd  time.Duration
	nodeGroupConfig         []string
	schedulerConfig         string
	cloudProvider           string
	localNodeReadyDelay     time.Duration
	localSlicesDelay        time.Duration
	address                 string
	leaderElect             bool
	namespace               string
	statusConfigMap         string
	leaderElectLeaseName    string
	leaderElectLeaseTimeout time.Duration

	// Failure model, health and leader election (options_failure.go).
	failureOptions
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.DurationVar(&o.scanInterval, "scan-interval", 10*time.Second, "how often the cluster is reevaluated")
	fs.StringVar(&o.expander, "expander", "least-waste", fmt.Sprintf("node group choice: one of %v", expander.Names))
	fs.StringVar(&o.expanderPriorities, "expander-priorities", "", "priority expander config file (priority: [group-name regexps])")
	fs.IntVar(&o.maxNodesTotal, "max-nodes-total", 0, "maximum number of nodes in all node groups, 0 for no limit")
	fs.BoolVar(&o.scaleDownEnabled, "scale-down-enabled", true, "whether to remove unneeded nodes")
	fs.DurationVar(&o.scaleDownUnneededTime, "scale-down-unneeded-time", 10*time.Minute, "how long a node must be unneeded before it is removed")
	fs.Float64Var(&o.scaleDownUtilization, "scale-down-utilization-threshold", 0.5,
		"nodes used below this share (of their DRA devices where they have any, else of CPU and memory) may be removed")
	fs.DurationVar(&o.scaleDownDelayAfterAdd, "scale-down-delay-after-add", 10*time.Minute, "how long after a scale-up scale-down resumes")
	fs.StringArrayVar(&o.nodeGroupConfig, "node-group-config", nil, "file or folder of NodeGroup objects (draxr.dev/v1alpha1), repeatable")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", "", "the scheduler's KubeSchedulerConfiguration, so simulations place pods as it does")
	fs.StringVar(&o.cloudProvider, "cloud-provider", "local", "cloud provider: local (nodes as API objects, for tests and demos)")
	fs.DurationVar(&o.localNodeReadyDelay, "local-node-ready-delay", 5*time.Second, "local provider: time until a new node is Ready")
	fs.DurationVar(&o.localSlicesDelay, "local-slices-delay", 3*time.Second, "local provider: time from Ready until the node's ResourceSlices are published")
	fs.StringVar(&o.address, "address", "127.0.0.1:8085", "address for /metrics and /healthz")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding the leader lease")
	fs.StringVar(&o.namespace, "namespace", "kube-system", "namespace of the leader lease and the status ConfigMap")
	fs.StringVar(&o.statusConfigMap, "status-config-map-name", "draxr-autoscaler-status", "status ConfigMap name, empty to disable")
	fs.StringVar(&o.leaderElectLeaseName, "leader-elect-resource-name", "draxr-autoscaler", "leader lease name")
	fs.DurationVar(&o.leaderElectLeaseTimeout, "leader-elect-lease-duration", 15*time.Second, "leader lease duration")
	o.failureOptions.addFlags(fs)
}

func (o *options) validate() error {
	switch {
	case o.scanInterval <= 0:
		return fmt.Errorf("--scan-interval must be positive, got %s", o.scanInterval)
	case o.maxNodesTotal < 0:
		return fmt.Errorf("--max-nodes-total must be >= 0, got %d", o.maxNodesTotal)
	case o.scaleDownUtilization < 0 || o.scaleDownUtilization > 1:
		return fmt.Errorf("--scale-down-utilization-threshold must be within [0, 1], got %g", o.scaleDownUtilization)
	case o.cloudProvider != "local":
		return fmt.Errorf("--cloud-provider %q is not supported (supported: local)", o.cloudProvider)
	case len(o.nodeGroupConfig) == 0:
		return fmt.Errorf("--node-group-config is required: the local provider's NodeGroup objects")
	}
	return o.failureOptions.validate(o.leaderElectLeaseTimeout)
}
