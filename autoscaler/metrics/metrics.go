// Package metrics defines draxr-autoscaler's Prometheus metrics: the
// Cluster Autoscaler's cluster_autoscaler_* names, types and labels for
// everything draxr does the same way (so CA's dashboards and alerts keep
// working), and draxr_autoscaler_* ones for what CA has no metric for (DRA
// devices per DeviceClass, pods asking for DRA-backed extended resources).
//
// The metrics live in component-base's legacyregistry, which /metrics
// serves: one set per process, registered once by the process (app.Run),
// never by an autoscaler value, so that a CLI or test building several
// autoscalers registers nothing twice. Until Register is called every
// update is a no-op, as with any component-base metric.
package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	caNamespace    = "cluster_autoscaler"
	draxrNamespace = "draxr_autoscaler"
)

// Label values, CA's.
const (
	// nodes_count{state}
	StateReady            = "ready"
	StateUnready          = "unready"
	StateNotStarted       = "notStarted"
	StateUnregistered     = "unregistered"
	StateLongUnregistered = "longUnregistered"

	// scaled_down_nodes_total{reason}
	ScaleDownUnderutilized = "underutilized"
	ScaleDownEmpty         = "empty"
	ScaleDownUnready       = "unready"

	// failed_scale_ups_total{reason} for draxr's own failures (a
	// provider's instance error code is used as is).
	FailedCloudProviderError = "cloudProviderError"
	FailedTimeout            = "timeout"

	// evicted_pods_total{eviction_result}
	EvictionSucceeded = "succeeded"
	EvictionFailed    = "failed"

	// errors_total{type}, CA's AutoscalerErrorType values.
	ErrorCloudProvider = "cloudProviderError"
	ErrorAPICall       = "apiCallError"
	ErrorInternal      = "internalError"
	ErrorConfiguration = "configurationError"

	// node_taints_count{type}, CA's taint types.
	// The autoscaler's own and Kubernetes' well-known taints are their keys.
	TaintOther = "other"

	// dra_node_template_resources_mismatch{mismatch_type}
	MismatchMissing  = "missing"
	MismatchExtra    = "extra"
	MismatchMismatch = "mismatch"
	MismatchUnknown  = "unknown"
)

// Function labels of function_duration_seconds and last_activity, CA's.
const (
	FunctionMain         = "main"
	FunctionAutoscaling  = "autoscaling"
	FunctionUpdateState  = "updateClusterState"
	FunctionRefresh      = "cloudProviderRefresh"
	FunctionScaleUp      = "scaleUp"
	FunctionEstimate     = "scaleUp:estimate"
	FunctionScaleDown    = "scaleDown"
	FunctionFindUnneeded = "findUnneeded"
	FunctionNodeDeletion = "scaleDown:nodeDeletion"
	FunctionSoftTaint    = "scaleDown:softTaintUnneeded"
)

// set is every metric draxr-autoscaler exports.
type set struct {
	// CA's, registered always.
	clusterSafeToAutoscale *metrics.Gauge
	nodesCount             *metrics.GaugeVec
	nodeGroupsCount        *metrics.GaugeVec
	unschedulablePodsCount *metrics.GaugeVec
	maxNodesCount          *metrics.Gauge
	cpuCurrentCores        *metrics.Gauge
	cpuLimitsCores         *metrics.GaugeVec
	memoryCurrentBytes     *metrics.Gauge
	memoryLimitsBytes      *metrics.GaugeVec
	lastActivity           *metrics.GaugeVec
	functionDuration       *metrics.HistogramVec
	// CA exports this summary and dashboards read it; component-base
	// deprecates summaries but still serves them.
	functionDurationSummary *metrics.SummaryVec //nolint:staticcheck // CA's contract
	pendingNodeDeletions    *metrics.Gauge
	errorsTotal             *metrics.CounterVec
	scaledUpNodes           *metrics.CounterVec
	failedScaleUps          *metrics.CounterVec
	failedNodeCreations     *metrics.CounterVec
	scaledDownNodes         *metrics.CounterVec
	evictedPods             *metrics.CounterVec
	unneededNodes           *metrics.Gauge
	unremovableNodes        *metrics.GaugeVec
	scaleDownInCooldown     *metrics.Gauge
	oldUnregisteredRemoved  *metrics.Counter
	skippedScaleEvents      *metrics.CounterVec
	nodeTaints              *metrics.GaugeVec
	draTemplateMismatch     *metrics.GaugeVec

	// CA's, only with --emit-per-nodegroup-metrics.
	nodeGroupMin       *metrics.GaugeVec
	nodeGroupMax       *metrics.GaugeVec
	nodeGroupTarget    *metrics.GaugeVec
	nodeGroupHealthy   *metrics.GaugeVec
	nodeGroupBackedOff *metrics.GaugeVec

	// draxr's own.
	plannedDevices *metrics.CounterVec
	devicesInUse   *metrics.GaugeVec
	devicesTotal   *metrics.GaugeVec
	extendedHelped *metrics.CounterVec
	unhelpablePods *metrics.GaugeVec
	provReqs       *metrics.GaugeVec
	dryRun         *metrics.Gauge

	registerOnce, perGroupOnce sync.Once
	// mu guards the gauges that are replaced as a whole each loop (Reset
	// and set), so a scrape never sees half of them.
	mu sync.Mutex
}

func gauge(ns, name, help string) *metrics.Gauge {
	return metrics.NewGauge(&metrics.GaugeOpts{Namespace: ns, Name: name, Help: help, StabilityLevel: metrics.ALPHA})
}

func gaugeVec(ns, name, help string, labels ...string) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: ns, Name: name, Help: help, StabilityLevel: metrics.ALPHA}, labels)
}

func counterVec(ns, name, help string, labels ...string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{Namespace: ns, Name: name, Help: help, StabilityLevel: metrics.ALPHA}, labels)
}

func newSet() *set {
	ca := caNamespace
	return &set{
		clusterSafeToAutoscale: gauge(ca, "cluster_safe_to_autoscale", "Whether or not cluster is healthy enough for autoscaling. 1 if it is, 0 otherwise."),
		nodesCount:             gaugeVec(ca, "nodes_count", "Number of nodes in cluster.", "state"),
		nodeGroupsCount:        gaugeVec(ca, "node_groups_count", "Number of node groups managed by the autoscaler.", "node_group_type"),
		unschedulablePodsCount: gaugeVec(ca, "unschedulable_pods_count", "Number of unschedulable pods in the cluster.", "type"),
		maxNodesCount:          gauge(ca, "max_nodes_count", "Maximum number of nodes in all node groups (capped by --max-nodes-total)."),
		cpuCurrentCores:        gauge(ca, "cluster_cpu_current_cores", "Current number of cores in the cluster, minus deleting nodes."),
		cpuLimitsCores:         gaugeVec(ca, "cpu_limits_cores", "Minimum and maximum number of cores in the cluster.", "direction"),
		memoryCurrentBytes:     gauge(ca, "cluster_memory_current_bytes", "Current number of bytes of memory in the cluster, minus deleting nodes."),
		memoryLimitsBytes:      gaugeVec(ca, "memory_limits_bytes", "Minimum and maximum number of bytes of memory in cluster.", "direction"),
		lastActivity:           gaugeVec(ca, "last_activity", "Last time certain part of the autoscaler's logic executed (Unix seconds).", "activity"),
		functionDuration: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: ca, Name: "function_duration_seconds",
			Help:    "Time taken by various parts of the autoscaler's main loop.",
			Buckets: metrics.ExponentialBuckets(0.01, 1.5, 30), StabilityLevel: metrics.ALPHA}, []string{"function"}),
		//nolint:staticcheck // CA's contract: a summary (see the field)
		functionDurationSummary: metrics.NewSummaryVec(&metrics.SummaryOpts{Namespace: ca, Name: "function_duration_quantile_seconds",
			Help: "Quantiles of time taken by various parts of the autoscaler's main loop.", MaxAge: time.Hour,
			StabilityLevel: metrics.ALPHA}, []string{"function"}),
		pendingNodeDeletions: gauge(ca, "pending_node_deletions", "Number of nodes that haven't been removed or aborted after finished scale-down phase."),
		errorsTotal:          counterVec(ca, "errors_total", "The number of autoscaler loops failed due to an error.", "type"),
		scaledUpNodes:        counterVec(ca, "scaled_up_nodes_total", "Number of nodes added by the autoscaler.", "gpu_resource_name", "gpu_name", "dra_drivers"),
		failedScaleUps:       counterVec(ca, "failed_scale_ups_total", "Number of times scale-up operation has failed.", "reason", "gpu_resource_name", "gpu_name", "dra_drivers"),
		failedNodeCreations:  counterVec(ca, "failed_node_creations_total", "Number of nodes that failed creation (instances in error).", "reason"),
		scaledDownNodes:      counterVec(ca, "scaled_down_nodes_total", "Number of nodes removed by the autoscaler.", "reason", "gpu_resource_name", "gpu_name", "dra_drivers"),
		evictedPods:          counterVec(ca, "evicted_pods_total", "Number of pods evicted by the autoscaler.", "eviction_result"),
		unneededNodes:        gauge(ca, "unneeded_nodes_count", "Number of nodes currently considered unneeded by the autoscaler."),
		unremovableNodes:     gaugeVec(ca, "unremovable_nodes_count", "Number of nodes currently considered unremovable by the autoscaler.", "reason"),
		scaleDownInCooldown:  gauge(ca, "scale_down_in_cooldown", "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise."),
		oldUnregisteredRemoved: metrics.NewCounter(&metrics.CounterOpts{Namespace: ca, Name: "old_unregistered_nodes_removed_count",
			Help: "Number of unregistered nodes removed by the autoscaler.", StabilityLevel: metrics.ALPHA}),
		skippedScaleEvents:  counterVec(ca, "skipped_scale_events_count", "Count of scaling events that the autoscaler has chosen to skip.", "direction", "reason"),
		nodeTaints:          gaugeVec(ca, "node_taints_count", "Number of taints per type used in the cluster.", "type"),
		draTemplateMismatch: gaugeVec(ca, "dra_node_template_resources_mismatch", "Count of resource pool mismatches between ready nodes and the node template used to predict them (DRA).", "driver", "mismatch_type"),

		nodeGroupMin:       gaugeVec(ca, "node_group_min_count", "Minimum number of nodes in the node group", "node_group"),
		nodeGroupMax:       gaugeVec(ca, "node_group_max_count", "Maximum number of nodes in the node group", "node_group"),
		nodeGroupTarget:    gaugeVec(ca, "node_group_target_count", "Target number of nodes in the node group.", "node_group"),
		nodeGroupHealthy:   gaugeVec(ca, "node_group_healthiness", "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise.", "node_group"),
		nodeGroupBackedOff: gaugeVec(ca, "node_group_backoff_status", "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise.", "node_group", "reason"),

		plannedDevices: counterVec(draxrNamespace, "planned_devices_total",
			"DRA devices the executed scale-ups were planned to give pending pods, per DeviceClass.", "device_class"),
		devicesInUse: gaugeVec(draxrNamespace, "devices_in_use",
			"DRA devices allocated to ResourceClaims, per DeviceClass (at the last loop); a counter set of a partitioned pool is one device, a device allocated several times counts the share of its capacity taken, admin access counts nothing.", "device_class"),
		devicesTotal: gaugeVec(draxrNamespace, "devices",
			"DRA devices published in node-local ResourceSlices, per driver (at the last loop); a counter set of a partitioned pool is one device.", "driver"),
		extendedHelped: counterVec(draxrNamespace, "extended_resource_pods_helped_total",
			"Pending pods asking for a DRA-backed extended resource that an executed scale-up was for, per resource name.", "resource"),
		unhelpablePods: gaugeVec(draxrNamespace, "unhelpable_pods",
			"Pending pods no scale-up can help at the last loop, by the planner's reason code.", "reason"),
		provReqs: gaugeVec(draxrNamespace, "provisioning_requests",
			"ProvisioningRequests this autoscaler serves, by class and state (Pending, Accepted, CapacityIsNotFound, Provisioned, BookingExpired, Failed), at the last loop.",
			"provisioning_class", "state"),
		dryRun: gauge(draxrNamespace, "dry_run",
			"1 when this autoscaler runs with --dry-run: every other series is what it would have done, nothing was changed."),
	}
}

// m is the process's one set: legacyregistry, which /metrics serves, is
// process-wide too.
var m = newSet()

func (s *set) main() []metrics.Registerable {
	return []metrics.Registerable{s.clusterSafeToAutoscale, s.nodesCount, s.nodeGroupsCount, s.unschedulablePodsCount,
		s.maxNodesCount, s.cpuCurrentCores, s.cpuLimitsCores, s.memoryCurrentBytes, s.memoryLimitsBytes, s.lastActivity,
		s.functionDuration, s.functionDurationSummary, s.pendingNodeDeletions, s.errorsTotal, s.scaledUpNodes,
		s.failedScaleUps, s.failedNodeCreations, s.scaledDownNodes, s.evictedPods, s.unneededNodes, s.unremovableNodes,
		s.scaleDownInCooldown, s.oldUnregisteredRemoved, s.skippedScaleEvents, s.nodeTaints, s.draTemplateMismatch,
		s.plannedDevices, s.devicesInUse, s.devicesTotal, s.extendedHelped, s.unhelpablePods, s.provReqs, s.dryRun}
}

func (s *set) perGroup() []metrics.Registerable {
	return []metrics.Registerable{s.nodeGroupMin, s.nodeGroupMax, s.nodeGroupTarget, s.nodeGroupHealthy, s.nodeGroupBackedOff}
}

// Register registers the metrics with the legacy registry (served on
// /metrics); perNodeGroup adds CA's --emit-per-nodegroup-metrics ones. It
// is safe to call more than once.
func Register(perNodeGroup bool) {
	m.registerOnce.Do(func() {
		legacyregistry.MustRegister(m.main()...)
		// As CA: the error and eviction series exist from the start, so
		// rate() over them works before the first failure.
		for _, t := range []string{ErrorCloudProvider, ErrorAPICall, ErrorInternal, ErrorConfiguration} {
			m.errorsTotal.WithLabelValues(t).Add(0)
		}
		for _, r := range []string{EvictionSucceeded, EvictionFailed} {
			m.evictedPods.WithLabelValues(r).Add(0)
		}
		for _, d := range []string{"up", "down"} {
			for _, r := range []string{"CpuResourceLimit", "MemoryResourceLimit"} {
				m.skippedScaleEvents.WithLabelValues(d, r).Add(0)
			}
		}
	})
	if perNodeGroup {
		m.perGroupOnce.Do(func() { legacyregistry.MustRegister(m.perGroup()...) })
	}
}

// Names returns the fully qualified names of every metric draxr-autoscaler
// can export (per-node-group ones included), for docs and dashboard checks.
func Names() []string {
	var out []string
	for _, c := range append(m.main(), m.perGroup()...) {
		out = append(out, c.FQName())
	}
	sort.Strings(out)
	return out
}

// UpdateClusterSafeToAutoscale records whether the cluster is healthy
// enough to autoscale (scale-down pauses otherwise).
func UpdateClusterSafeToAutoscale(safe bool) { m.clusterSafeToAutoscale.Set(b2f(safe)) }

// NodeCounts are nodes by CA's states.
type NodeCounts struct {
	Ready, Unready, NotStarted, Unregistered, LongUnregistered int
}

// UpdateNodesCount records the nodes by state.
func UpdateNodesCount(c NodeCounts) {
	m.nodesCount.WithLabelValues(StateReady).Set(float64(c.Ready))
	m.nodesCount.WithLabelValues(StateUnready).Set(float64(c.Unready))
	m.nodesCount.WithLabelValues(StateNotStarted).Set(float64(c.NotStarted))
	m.nodesCount.WithLabelValues(StateUnregistered).Set(float64(c.Unregistered))
	m.nodesCount.WithLabelValues(StateLongUnregistered).Set(float64(c.LongUnregistered))
}

// UpdateNodeGroupsCount records the number of node groups; draxr does
// not create node groups, so autoprovisioned is always 0.
func UpdateNodeGroupsCount(autoscaled int) {
	m.nodeGroupsCount.WithLabelValues("autoscaled").Set(float64(autoscaled))
	m.nodeGroupsCount.WithLabelValues("autoprovisioned").Set(0)
}

// UpdateUnschedulablePodsCount records the pending pods the scheduler gave
// up on and those it has not tried yet.
func UpdateUnschedulablePodsCount(unschedulable, schedulerUnprocessed int) {
	m.unschedulablePodsCount.WithLabelValues("unschedulable").Set(float64(unschedulable))
	m.unschedulablePodsCount.WithLabelValues("scheduler_unprocessed").Set(float64(schedulerUnprocessed))
}

// UpdateMaxNodesCount records the sum of the groups' max sizes, capped by
// --max-nodes-total when set.
func UpdateMaxNodesCount(n int) { m.maxNodesCount.Set(float64(n)) }

// UpdateClusterResources records the cluster's cores and memory bytes.
func UpdateClusterResources(cores, memoryBytes int64) {
	m.cpuCurrentCores.Set(float64(cores))
	m.memoryCurrentBytes.Set(float64(memoryBytes))
}

// UpdateResourceLimits records --cores-total and --memory-total (bytes).
func UpdateResourceLimits(minCores, maxCores, minMemory, maxMemory int64) {
	m.cpuLimitsCores.WithLabelValues("minimum").Set(float64(minCores))
	m.cpuLimitsCores.WithLabelValues("maximum").Set(float64(maxCores))
	m.memoryLimitsBytes.WithLabelValues("minimum").Set(float64(minMemory))
	m.memoryLimitsBytes.WithLabelValues("maximum").Set(float64(maxMemory))
}

// UpdateLastTime records when the step named by label last started.
func UpdateLastTime(label string, now time.Time) {
	m.lastActivity.WithLabelValues(label).Set(float64(now.Unix()))
}

// UpdateDurationFromStart records how long the step named by label took.
func UpdateDurationFromStart(label string, start time.Time) {
	UpdateDuration(label, time.Since(start))
}

// UpdateDuration records how long the step named by label took.
func UpdateDuration(label string, d time.Duration) {
	m.functionDuration.WithLabelValues(label).Observe(d.Seconds())
	m.functionDurationSummary.WithLabelValues(label).Observe(d.Seconds())
}

// ObservePendingNodeDeletions records the nodes being removed.
func ObservePendingNodeDeletions(n int) { m.pendingNodeDeletions.Set(float64(n)) }

// RegisterError counts an error of CA's type (ErrorCloudProvider, ...).
func RegisterError(typ string) { m.errorsTotal.WithLabelValues(typ).Inc() }

// GroupLabels are CA's GPU and DRA labels of a node group's nodes.
type GroupLabels struct {
	// GPUResourceName is the device-plugin GPU resource the template
	// advertises ("" for none), GPUName its type ("" when unknown).
	GPUResourceName, GPUName string
	// DRADrivers are the drivers of the template's ResourceSlices.
	DRADrivers []string
}

// draDrivers is CA's dra_drivers value: sorted, unique, comma-joined.
func (l GroupLabels) draDrivers() string {
	d := append([]string(nil), l.DRADrivers...)
	sort.Strings(d)
	var out []string
	for i, s := range d {
		if s != "" && (i == 0 || d[i-1] != s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

// RegisterScaleUp counts nodes added to a group.
func RegisterScaleUp(nodes int, l GroupLabels) {
	m.scaledUpNodes.WithLabelValues(l.GPUResourceName, l.GPUName, l.draDrivers()).Add(float64(nodes))
}

// RegisterFailedScaleUp counts a failed scale-up by reason.
func RegisterFailedScaleUp(reason string, l GroupLabels) {
	m.failedScaleUps.WithLabelValues(reason, l.GPUResourceName, l.GPUName, l.draDrivers()).Inc()
}

// RegisterFailedNodeCreations counts instances the provider reports in
// error, by their error code.
func RegisterFailedNodeCreations(reason string, n int) {
	m.failedNodeCreations.WithLabelValues(reason).Add(float64(n))
}

// RegisterScaleDown counts nodes removed, by CA's reason.
func RegisterScaleDown(nodes int, reason string, l GroupLabels) {
	m.scaledDownNodes.WithLabelValues(reason, l.GPUResourceName, l.GPUName, l.draDrivers()).Add(float64(nodes))
}

// RegisterEvictions counts pod evictions by result.
func RegisterEvictions(pods int, result string) {
	m.evictedPods.WithLabelValues(result).Add(float64(pods))
}

// UpdateUnneededNodesCount records the nodes found unneeded.
func UpdateUnneededNodesCount(n int) { m.unneededNodes.Set(float64(n)) }

// UpdateUnremovableNodesCount replaces the unremovable nodes by reason.
func UpdateUnremovableNodesCount(byReason map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unremovableNodes.Reset()
	for r, n := range byReason {
		m.unremovableNodes.WithLabelValues(r).Set(float64(n))
	}
}

// UpdateScaleDownInCooldown records whether scale-down waits for a delay.
func UpdateScaleDownInCooldown(in bool) { m.scaleDownInCooldown.Set(b2f(in)) }

// RegisterOldUnregisteredNodesRemoved counts long-unregistered instances
// deleted.
func RegisterOldUnregisteredNodesRemoved(n int) { m.oldUnregisteredRemoved.Add(float64(n)) }

// RegisterSkippedScaleEvent counts a scale-up or -down skipped because of
// a limit (direction "up" or "down"; reason e.g. CpuResourceLimit).
func RegisterSkippedScaleEvent(direction, reason string) {
	m.skippedScaleEvents.WithLabelValues(direction, reason).Inc()
}

// UpdateNodeTaintsCount replaces the taint counts by type.
func UpdateNodeTaintsCount(byType map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodeTaints.Reset()
	for t, n := range byType {
		m.nodeTaints.WithLabelValues(t).Set(float64(n))
	}
}

// MismatchKey is a driver and a mismatch type.
type MismatchKey struct{ Driver, Type string }

// UpdateDRATemplateMismatch replaces the template mismatch counts.
func UpdateDRATemplateMismatch(counts map[MismatchKey]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.draTemplateMismatch.Reset()
	for k, n := range counts {
		m.draTemplateMismatch.WithLabelValues(k.Driver, k.Type).Set(float64(n))
	}
}

// NodeGroupState is one group's per-node-group metrics.
type NodeGroupState struct {
	Name             string
	Min, Max, Target int
	Healthy          bool
	BackedOff        bool
	BackoffReason    string
}

// UpdateNodeGroups replaces the per-node-group metrics (registered only
// with --emit-per-nodegroup-metrics; no-ops otherwise).
func UpdateNodeGroups(groups []NodeGroupState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range []*metrics.GaugeVec{m.nodeGroupMin, m.nodeGroupMax, m.nodeGroupTarget, m.nodeGroupHealthy, m.nodeGroupBackedOff} {
		v.Reset()
	}
	for _, g := range groups {
		m.nodeGroupMin.WithLabelValues(g.Name).Set(float64(g.Min))
		m.nodeGroupMax.WithLabelValues(g.Name).Set(float64(g.Max))
		m.nodeGroupTarget.WithLabelValues(g.Name).Set(float64(g.Target))
		m.nodeGroupHealthy.WithLabelValues(g.Name).Set(b2f(g.Healthy))
		// As CA: reason "" with 0 when not backed off.
		reason := ""
		if g.BackedOff {
			reason = g.BackoffReason
		}
		m.nodeGroupBackedOff.WithLabelValues(g.Name, reason).Set(b2f(g.BackedOff))
	}
}

// RegisterPlannedDevices counts devices an executed scale-up was planned
// to give pods, per DeviceClass.
func RegisterPlannedDevices(byClass map[string]int) {
	for c, n := range byClass {
		m.plannedDevices.WithLabelValues(c).Add(float64(n))
	}
}

// UpdateDevices replaces the devices allocated per DeviceClass and those
// published per driver.
func UpdateDevices(inUseByClass map[string]float64, publishedByDriver map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.devicesInUse.Reset()
	for c, n := range inUseByClass {
		m.devicesInUse.WithLabelValues(c).Set(n)
	}
	m.devicesTotal.Reset()
	for d, n := range publishedByDriver {
		m.devicesTotal.WithLabelValues(d).Set(float64(n))
	}
}

// RegisterExtendedResourcePodsHelped counts pods asking for DRA-backed
// extended resources that an executed scale-up was for, per resource.
func RegisterExtendedResourcePodsHelped(byResource map[string]int) {
	for r, n := range byResource {
		m.extendedHelped.WithLabelValues(r).Add(float64(n))
	}
}

// UpdateUnhelpablePods replaces the pending pods no scale-up helps, by
// the planner's reason code.
func UpdateUnhelpablePods(byReason map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unhelpablePods.Reset()
	for r, n := range byReason {
		m.unhelpablePods.WithLabelValues(r).Set(float64(n))
	}
}

// UpdateProvisioningRequests replaces the served requests' counts, by
// {class, state}.
func UpdateProvisioningRequests(byClassAndState map[[2]string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.provReqs.Reset()
	for k, n := range byClassAndState {
		m.provReqs.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetDryRun marks the metrics as a dry run's (draxr_autoscaler_dry_run).
func SetDryRun(on bool) {
	if on {
		m.dryRun.Set(1)
	} else {
		m.dryRun.Set(0)
	}
}
