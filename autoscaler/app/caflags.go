package app

// caFlag is one of the Cluster Autoscaler's command-line flags: its name
// and default as CA's --help prints them, and its kind (how a value
// parses). Names and defaults were read from CA's source, not copied:
// kubernetes-sigs/cluster-autoscaler pkg/config/flags/flags.go (commit
// 1e7a904), pkg/config/const.go and autoscaling_options.go for the
// constants it uses, and CA's main (leader election through
// component-base's BindLeaderElectionFlags, klog.InitFlags, component-base
// logsapi.AddFlags, the feature gate).
type caFlag struct {
	name string
	kind flagKind
	def  string
}

// flagKind is how a flag's value parses.
type flagKind string

const (
	kindBool     flagKind = "bool"
	kindDuration flagKind = "duration"
	kindInt      flagKind = "int"
	kindFloat    flagKind = "float"
	kindString   flagKind = "string"
	// kindArray is repeatable (pflag StringArray); kindList is a comma
	// list (pflag StringSlice).
	kindArray flagKind = "stringArray"
	kindList  flagKind = "stringSlice"
)

// caFlags lists every flag of the Cluster Autoscaler's binary.
func caFlags() []caFlag {
	b, d, i, f, s, a, l := kindBool, kindDuration, kindInt, kindFloat, kindString, kindArray, kindList
	return []caFlag{
		// pkg/config/flags/flags.go
		{"cluster-name", s, ""},
		{"address", s, ":8085"},
		{"kubernetes", s, ""},
		{"kubeconfig", s, ""},
		{"kube-api-content-type", s, "application/vnd.kubernetes.protobuf"},
		{"kube-client-burst", i, "10"},
		{"kube-client-qps", f, "5"},
		{"cloud-config", s, ""},
		{"cloud-provider", s, "gce"}, // the all-providers build
		{"namespace", s, "kube-system"},
		{"enforce-node-group-min-size", b, "false"},
		{"scale-down-unready-enabled", b, "true"},
		{"scale-down-delay-after-add", d, "10m"},
		{"scale-down-delay-type-local", b, "false"},
		{"scale-down-delay-after-delete", d, "0s"},
		{"scale-down-delay-after-failure", d, "3m"},
		{"scale-down-unneeded-time", d, "10m"},
		{"scale-down-unready-time", d, "20m"},
		{"scale-down-utilization-threshold", f, "0.5"},
		{"scale-down-gpu-utilization-threshold", f, "0.5"},
		{"scale-down-non-empty-candidates-count", i, "30"},
		{"scale-down-candidates-pool-ratio", f, "0.1"},
		{"scale-down-candidates-pool-min-count", i, "50"},
		{"node-deletion-delay-timeout", d, "2m"},
		{"node-deletion-batcher-interval", d, "0s"},
		{"scan-interval", d, "10s"},
		{"max-nodes-total", i, "0"},
		{"max-bulk-soft-taint-count", i, "10"},
		{"max-bulk-soft-taint-time", d, "3s"},
		{"max-total-unready-percentage", f, "45"},
		{"ok-total-unready-count", i, "3"},
		{"unready-nodes-scope", s, "cluster"},
		{"scale-up-from-zero", b, "true"},
		{"parallel-scale-up", b, "false"},
		{"max-node-provision-time", d, "15m"},
		{"max-node-startup-time", d, "15m"},
		{"max-pod-eviction-time", d, "2m"},
		{"estimator", s, "binpacking"},
		{"expander", s, "least-waste"},
		{"grpc-expander-cert", s, ""},
		{"grpc-expander-url", s, ""},
		{"ignore-daemonsets-utilization", b, "false"},
		{"ignore-mirror-pods-utilization", b, "false"},
		{"write-status-configmap", b, "true"},
		{"status-config-map-name", s, "cluster-autoscaler-status"},
		{"max-inactivity", d, "10m"},
		{"max-binpacking-time", d, "5m"},
		{"max-failing-time", d, "15m"},
		{"max-startup-time", d, "20m"},
		{"balance-similar-node-groups", b, "false"},
		{"unremovable-node-recheck-timeout", d, "5m"},
		{"expendable-pods-priority-cutoff", i, "-10"},
		{"regional", b, "false"},
		{"new-pod-scale-up-delay", d, "0s"},
		{"scale-from-unschedulable", b, "false"},
		{"profiling", b, "false"},
		{"clusterapi-cloud-config-authoritative", b, "false"},
		{"cordon-node-before-terminating", b, "true"},
		{"daemonset-eviction-for-empty-nodes", b, "false"},
		{"daemonset-eviction-for-occupied-nodes", b, "true"},
		{"user-agent", s, "cluster-autoscaler"},
		{"emit-per-nodegroup-metrics", b, "false"},
		{"debugging-snapshot-enabled", b, "false"},
		{"node-info-cache-expire-time", d, "87600h"},
		{"initial-node-group-backoff-duration", d, "5m"},
		{"max-node-group-backoff-duration", d, "30m"},
		{"node-group-backoff-reset-timeout", d, "3h"},
		{"max-scale-down-parallelism", i, "10"},
		{"max-drain-parallelism", i, "1"},
		{"record-duplicated-events", b, "false"},
		{"max-nodes-per-scaleup", i, "1000"},
		{"max-nodegroup-binpacking-duration", d, "10s"},
		{"fastpath-binpacking-enabled", b, "false"},
		{"skip-nodes-with-system-pods", b, "true"},
		{"skip-nodes-with-local-storage", b, "true"},
		{"skip-nodes-with-custom-controller-pods", b, "true"},
		{"min-replica-count", i, "0"},
		{"blocking-system-pod-distruption-timeout", d, "1h"}, // CA's spelling
		{"node-delete-delay-after-taint", d, "5s"},
		{"scale-down-simulation-timeout", d, "30s"},
		{"memory-difference-ratio", f, "0.015"},
		{"max-free-difference-ratio", f, "0.05"},
		{"max-allocatable-difference-ratio", f, "0.05"},
		{"force-ds", b, "false"},
		{"dynamic-node-delete-delay-after-taint-enabled", b, "false"},
		{"enable-provisioning-requests", b, "false"},
		{"provisioning-request-initial-backoff-time", d, "1m"},
		{"provisioning-request-max-backoff-time", d, "10m"},
		{"provisioning-request-max-backoff-cache-size", i, "1000"},
		{"frequent-loops-enabled", b, "true"},
		{"async-node-groups", b, "false"},
		{"enable-proactive-scaleup", b, "false"},
		{"salvo-scale-up", b, "false"},
		{"salvo-scale-up-budget", d, "1m"},
		{"scaleup-simulation-for-skipped-node-groups-enabled", b, "false"},
		{"bulk-mig-instances-listing-enabled", b, "false"},
		{"gce-concurrent-refreshes", i, "1"},
		{"gce-mig-instances-min-refresh-wait-time", d, "5s"},
		{"aws-use-static-instance-list", b, "false"},
		{"balancing-ignore-label", a, "[]"},
		{"balancing-label", a, "[]"},
		{"startup-taint-prefix", a, "[]"},
		{"pod-injection-limit", i, "5000"},
		{"check-capacity-batch-processing", b, "false"},
		{"check-capacity-provisioning-request-max-batch-size", i, "10"},
		{"check-capacity-provisioning-request-batch-timebox", d, "10s"},
		{"force-delete-unregistered-nodes", b, "false"},
		{"force-delete-failed-nodes", b, "false"},
		{"enable-csi-node-aware-scheduling", b, "true"},
		{"predicate-parallelism", i, "4"},
		{"check-capacity-processor-instance", s, ""},
		{"node-deletion-candidate-ttl", d, "0s"},
		{"capacity-buffer-controller-enabled", b, "false"},
		{"capacity-buffer-pod-injection-enabled", b, "false"},
		{"capacity-buffer-pod-dry-run-enabled", b, "true"},
		{"capacity-buffer-ready-replicas-enabled", b, "true"},
		{"node-removal-latency-tracking-enabled", b, "false"},
		{"max-node-skip-eval-time-tracker-enabled", b, "false"},
		{"capacity-quotas-enabled", b, "false"},
		{"pending-pods-batching-timeout", d, "4m"},
		{"enable-graceful-degradation", b, "false"},
		{"enable-inter-pod-affinity-hostname-fast-path", b, "false"},
		{"ignore-taint", a, "[]"},
		{"enable-dynamic-resource-allocation", b, "true"},
		{"cluster-snapshot-parallelism", i, "16"},
		{"scale-down-enabled", b, "true"},
		{"nodes", a, "[]"},
		{"node-group-auto-discovery", a, "[]"},
		{"scheduler-config-file", s, ""},
		{"cores-total", s, "0:320000"},
		{"memory-total", s, "0:6400000"},
		{"max-graceful-termination-sec", i, "600"},
		{"gpu-total", a, "[]"},
		{"startup-taint", a, "[]"},
		{"status-taint", a, "[]"},
		{"bypassed-scheduler-names", l, "[]"},
		{"allowed-scheduler-names", l, "[]"},
		{"drain-priority-config", s, ""},
		{"scheduler-verbosity", i, "-1"},

		// main: component-base leader election, CA's defaults.
		{"leader-elect", b, "true"},
		{"leader-elect-lease-duration", d, "15s"},
		{"leader-elect-renew-deadline", d, "10s"},
		{"leader-elect-retry-period", d, "2s"},
		{"leader-elect-resource-lock", s, "leases"},
		{"leader-elect-resource-name", s, "cluster-autoscaler"},
		{"leader-elect-resource-namespace", s, ""},

		// main: component-base logging and the feature gate.
		{"logging-format", s, "text"},
		{"log-flush-frequency", d, "5s"},
		{"v", kindString, "0"},
		{"vmodule", kindString, ""},
		{"log-text-split-stream", b, "false"},
		{"log-text-info-buffer-size", s, "0"},
		{"log-json-split-stream", b, "false"},
		{"log-json-info-buffer-size", s, "0"},
		{"feature-gates", s, ""},

		// main: klog.InitFlags (CA normalizes "_" to "-" on the command
		// line, so --log-dir and --log_dir are the same flag).
		{"add_dir_header", b, "false"},
		{"alsologtostderr", b, "false"},
		{"alsologtostderrthreshold", s, "0"},
		{"legacy_stderr_threshold_behavior", b, "true"},
		{"log_backtrace_at", s, ":0"},
		{"log_dir", s, ""},
		{"log_file", s, ""},
		{"log_file_max_size", i, "1800"},
		{"logtostderr", b, "true"},
		{"one_output", b, "false"},
		{"skip_headers", b, "false"},
		{"skip_log_headers", b, "false"},
		{"stderrthreshold", s, "2"},
	}
}
