package app

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/featuregates"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/taints"
)

// caOptions are Cluster Autoscaler flags draxr implements with CA's names,
// meanings and defaults: the API client, the status ConfigMap switch,
// which pending pods are planned for, and the leader election lock.
type caOptions struct {
	// recordDuplicatedEvents turns off the recorder's once-per-5-minutes
	// filter (newEventBroadcaster).
	recordDuplicatedEvents bool
	master                 string
	kubeClientQPS          float64
	kubeClientBurst        int
	kubeAPIContentType     string
	userAgent              string
	writeStatusConfigMap   bool
	resourceLock           string
	estimator              string
	enableDRA              bool
	newPodScaleUpDelay     time.Duration
	pods                   scaleup.Flags
	featureGates           map[string]bool
	// CA's taint flags; --ignore-taint is --startup-taint's older name.
	startupTaints, ignoreTaints, startupTaintPrefixes, statusTaints []string
	nodeInfoCacheExpireTime                                         time.Duration
}

// taints is what the taint flags say.
func (o *caOptions) taints() taints.Config {
	return taints.Config{StartupTaints: append(slices.Clone(o.startupTaints), o.ignoreTaints...),
		StartupTaintPrefixes: o.startupTaintPrefixes, StatusTaints: o.statusTaints}
}

// schedulerConfig is --scheduler-config, which CA calls
// --scheduler-config-file: both names set it.
func (o *caOptions) addFlags(fs *pflag.FlagSet, schedulerConfig *string) {
	fs.StringVar(&o.master, "kubernetes", "", "API server address, overriding the kubeconfig's; empty for the kubeconfig's or in-cluster")
	fs.Float64Var(&o.kubeClientQPS, "kube-client-qps", float64(rest.DefaultQPS), "queries per second of the API client")
	fs.IntVar(&o.kubeClientBurst, "kube-client-burst", rest.DefaultBurst, "burst of the API client")
	fs.StringVar(&o.kubeAPIContentType, "kube-api-content-type", runtime.ContentTypeProtobuf,
		"content type of requests to the API server (application/vnd.kubernetes.protobuf or application/json)")
	fs.StringVar(&o.userAgent, "user-agent", "draxr-autoscaler", "user agent of the API client")
	fs.BoolVar(&o.recordDuplicatedEvents, "record-duplicated-events", false,
		"write an event again when the same one (object, reason, message) was written in the last 5 minutes")
	fs.BoolVar(&o.writeStatusConfigMap, "write-status-configmap", true, "whether to write the status ConfigMap (--status-config-map-name)")
	fs.StringVar(&o.resourceLock, "leader-elect-resource-lock", resourcelock.LeasesResourceLock,
		"leader election lock type; only leases")
	fs.StringVar(schedulerConfig, "scheduler-config-file", "", "the Cluster Autoscaler's name for --scheduler-config")
	fs.StringVar(&o.estimator, "estimator", "binpacking", "scale-up estimator; only binpacking")
	fs.BoolVar(&o.enableDRA, "enable-dynamic-resource-allocation", true, "DRA objects are always handled; false is an error, as in the Cluster Autoscaler")
	fs.DurationVar(&o.newPodScaleUpDelay, "new-pod-scale-up-delay", 0,
		"pending pods younger than this do not trigger a scale-up yet; a pod's cluster-autoscaler.kubernetes.io/pod-scale-up-delay annotation may raise it")
	o.pods.AddFlags(fs)
	fs.StringArrayVar(&o.startupTaints, "startup-taint", nil,
		"a taint key (repeatable) that means the node is still starting: it counts as not ready and a template copied from it leaves the taint out")
	fs.StringArrayVar(&o.ignoreTaints, "ignore-taint", nil, "the older name of --startup-taint")
	fs.StringArrayVar(&o.startupTaintPrefixes, "startup-taint-prefix", nil,
		"a taint key prefix (repeatable) of startup taints, on CA's built-in ignore-taint.cluster-autoscaler.kubernetes.io/ and startup-taint.cluster-autoscaler.kubernetes.io/")
	fs.StringArrayVar(&o.statusTaints, "status-taint", nil,
		"a taint key (repeatable) that reports a node's state: a template copied from the node leaves it out, the node stays ready")
	fs.DurationVar(&o.nodeInfoCacheExpireTime, "node-info-cache-expire-time", clusterapi.DefaultTemplateCacheExpiry,
		"how long a node group's template copied from one of its nodes still serves once none of its nodes is fit to copy (unready, new, or gone at zero replicas); 0 keeps no copy")
	featuregates.AddFlag(fs, &o.featureGates,
		"key=value pairs of Kubernetes feature gates for the simulated scheduler, as kube-scheduler takes them (e.g. DRAConsumableCapacity=true)")
}

func (o *caOptions) validate() error {
	switch {
	case o.kubeClientQPS <= 0 || o.kubeClientBurst <= 0:
		return fmt.Errorf("--kube-client-qps and --kube-client-burst must be > 0, got %v and %d", o.kubeClientQPS, o.kubeClientBurst)
	case o.kubeAPIContentType != runtime.ContentTypeProtobuf && o.kubeAPIContentType != runtime.ContentTypeJSON:
		return fmt.Errorf("--kube-api-content-type %q is not supported (supported: %s, %s)", o.kubeAPIContentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
	case o.resourceLock != resourcelock.LeasesResourceLock:
		return fmt.Errorf("--leader-elect-resource-lock %q is not supported: draxr-autoscaler locks with a Lease (%q), CA's default; "+
			"client-go no longer offers the endpoints and configmaps locks, and the migration locks are only for moving off them", o.resourceLock, resourcelock.LeasesResourceLock)
	case o.estimator != "binpacking":
		return fmt.Errorf("--estimator %q is not supported: draxr estimates by bin packing only (binpacking)", o.estimator)
	case !o.enableDRA:
		return fmt.Errorf("--enable-dynamic-resource-allocation=false is not supported: draxr-autoscaler always handles DRA objects (CA locks it to true too)")
	case o.newPodScaleUpDelay < 0:
		return fmt.Errorf("--new-pod-scale-up-delay must be >= 0, got %s", o.newPodScaleUpDelay)
	case o.nodeInfoCacheExpireTime < 0:
		return fmt.Errorf("--node-info-cache-expire-time must be >= 0, got %s", o.nodeInfoCacheExpireTime)
	}
	for _, f := range []struct {
		flag string
		keys []string
	}{{"--startup-taint", o.startupTaints}, {"--ignore-taint", o.ignoreTaints},
		{"--startup-taint-prefix", o.startupTaintPrefixes}, {"--status-taint", o.statusTaints}} {
		if slices.Contains(f.keys, "") {
			return fmt.Errorf("%s: an empty taint key", f.flag)
		}
	}
	for _, n := range o.pods.BypassedSchedulerNames {
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("--bypassed-scheduler-names %q: a name is empty", strings.Join(o.pods.BypassedSchedulerNames, ","))
		}
	}
	return nil
}

// restConfig applies the client flags to cfg.
func (o *caOptions) restConfig(cfg *rest.Config) {
	cfg.QPS = float32(o.kubeClientQPS)
	cfg.Burst = o.kubeClientBurst
	cfg.ContentType = o.kubeAPIContentType
	if o.kubeAPIContentType == runtime.ContentTypeProtobuf {
		// Custom resources (Cluster API) are served as JSON only.
		cfg.AcceptContentTypes = strings.Join([]string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON}, ",")
	}
	cfg.UserAgent = o.userAgent
}

// expanderUsesPriority reports --expander naming the priority expander.
func expanderUsesPriority(name string) bool {
	return slices.Contains(strings.Split(strings.ReplaceAll(name, " ", ""), ","), "priority")
}
