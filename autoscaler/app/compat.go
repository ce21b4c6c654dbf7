package app

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
)

// A Cluster Autoscaler flag draxr-autoscaler registers is supported: its
// name, meaning and default are CA's (a test checks the defaults). Every
// other CA flag is in compatTable: accepted and parsed, and then either
// warned about (it has no effect in draxr) or rejected at start-up, with
// why. None is silently ignored.

// compatAction is what happens when a CA flag draxr lacks is given.
type compatAction string

const (
	// warn: accepted; a warning names the flag and why it has no effect.
	warn compatAction = "warn"
	// reject: a start-up error says why, unless the value is accept.
	reject compatAction = "reject"
)

type compatEntry struct {
	name   string
	action compatAction
	// accept (reject entries only): the value, CA's default, that is what
	// draxr does anyway; it is accepted with a warning.
	accept string
	why    string
}

// compatTable lists every CA flag draxr-autoscaler does not register.
func compatTable() []compatEntry {
	const (
		perf = "a CA performance tuning knob; draxr's planner has no such limit"
		gce  = "GCE/GKE only"
		nap  = "node autoprovisioning (creating node groups) is not supported by draxr"
		// klog's output flags (CA's main binds them with klog.InitFlags).
		klogOut = "draxr-autoscaler logs every message to stderr (klog's default); klog's output options are not supported (-v and --vmodule are)"
	)
	return []compatEntry{
		{"cluster-name", warn, "", "names the cluster to cloud providers that need it (" + gce + "); draxr's providers do not"},
		{"enforce-node-group-min-size", reject, "false", "draxr does not scale a group up to its minimum size without pending pods"},
		{"scale-down-unready-enabled", reject, "true", "draxr always removes nodes unready for --scale-down-unready-time"},
		{"scale-down-delay-type-local", reject, "false", "draxr applies --scale-down-delay-after-* cluster-wide"},
		{"scale-down-non-empty-candidates-count", warn, "", "a CA performance tuning knob draxr does not use: a loop evaluates candidates until it has found as many unneeded nodes as --max-scale-down-parallelism lets the next loops remove (CA's bound), or --scale-down-simulation-timeout ends it"},
		{"scale-down-candidates-pool-ratio", warn, "", "a CA performance tuning knob draxr does not use: a loop evaluates candidates until it has found as many unneeded nodes as --max-scale-down-parallelism lets the next loops remove (CA's bound), or --scale-down-simulation-timeout ends it"},
		{"scale-down-candidates-pool-min-count", warn, "", "a CA performance tuning knob draxr does not use: a loop evaluates candidates until it has found as many unneeded nodes as --max-scale-down-parallelism lets the next loops remove (CA's bound), or --scale-down-simulation-timeout ends it"},
		{"node-deletion-delay-timeout", warn, "", "draxr does not wait for delay-deletion.cluster-autoscaler.kubernetes.io/ annotations"},
		{"node-deletion-batcher-interval", warn, "", "draxr deletes each node as soon as it is drained (CA's default, 0s)"},
		{"unready-nodes-scope", reject, "cluster", "draxr counts every node of the cluster for cluster health (CA's default)"},
		{"scale-up-from-zero", reject, "true", "draxr always scales up when no node is ready"},
		{"parallel-scale-up", reject, "false", "draxr executes one scale-up per loop"},
		{"max-pod-eviction-time", warn, "", "draxr retries evictions until --max-graceful-termination-sec"},
		{"grpc-expander-cert", warn, "", "draxr has no grpc expander (--expander=grpc is rejected)"},
		{"grpc-expander-url", warn, "", "draxr has no grpc expander (--expander=grpc is rejected)"},
		{"max-binpacking-time", warn, "", perf},
		{"unremovable-node-recheck-timeout", warn, "", "draxr checks every node again each loop"},
		{"regional", warn, "", gce},
		{"scale-from-unschedulable", reject, "false", "draxr plans with a node group template's spec.unschedulable as given"},
		{"cordon-node-before-terminating", warn, "", "draxr marks a node for removal with the ToBeDeletedByClusterAutoscaler NoSchedule taint; it does not set spec.unschedulable"},
		{"daemonset-eviction-for-empty-nodes", reject, "false", "draxr evicts a DaemonSet pod only when it has cluster-autoscaler.kubernetes.io/enable-ds-eviction: \"true\""},
		{"daemonset-eviction-for-occupied-nodes", warn, "", "draxr evicts a DaemonSet pod only when it has cluster-autoscaler.kubernetes.io/enable-ds-eviction: \"true\"; others go with the node"},
		{"debugging-snapshot-enabled", reject, "false", "draxr-autoscaler serves no /snapshotz endpoint"},
		{"max-nodegroup-binpacking-duration", warn, "", perf},
		{"fastpath-binpacking-enabled", warn, "", perf},
		{"min-replica-count", reject, "0", "draxr does not keep pods of small ReplicaSets from being evicted"},
		{"blocking-system-pod-distruption-timeout", warn, "", "with --skip-nodes-with-system-pods, a kube-system pod without a PodDisruptionBudget always keeps its node; there is no timeout"},
		{"node-delete-delay-after-taint", warn, "", "draxr deletes a node once its evicted pods are gone"},
		{"force-ds", reject, "false", "draxr does not block a scale-up for DaemonSet pods that would not fit"},
		{"dynamic-node-delete-delay-after-taint-enabled", warn, "", "draxr deletes a node once its evicted pods are gone"},
		{"async-node-groups", reject, "false", nap},
		{"enable-proactive-scaleup", reject, "false", "draxr scales up for pods that exist, not for pods a controller is about to create"},
		{"salvo-scale-up", reject, "false", "draxr executes one scale-up per loop"},
		{"salvo-scale-up-budget", warn, "", "draxr executes one scale-up per loop"},
		{"scaleup-simulation-for-skipped-node-groups-enabled", warn, "", "draxr does not simulate node groups it leaves out of a scale-up"},
		{"bulk-mig-instances-listing-enabled", warn, "", gce},
		{"gce-concurrent-refreshes", warn, "", gce},
		{"gce-mig-instances-min-refresh-wait-time", warn, "", gce},
		{"aws-use-static-instance-list", warn, "", "AWS only"},
		{"pod-injection-limit", warn, "", "draxr injects no pods for controllers' future replicas (--enable-proactive-scaleup is rejected); a ProvisioningRequest's and a CapacityBuffer's pods are their own counts"},
		{"force-delete-unregistered-nodes", reject, "false", "draxr never removes a node group's instances below its minimum size"},
		{"force-delete-failed-nodes", reject, "false", "draxr never removes a node group's instances below its minimum size"},
		{"enable-csi-node-aware-scheduling", warn, "", "draxr's simulation does not model CSINode volume limits"},
		{"predicate-parallelism", warn, "", perf},
		{"node-deletion-candidate-ttl", warn, "", "draxr keeps unneeded-node state in memory only; a restarted autoscaler starts counting --scale-down-unneeded-time again"},
		{"capacity-buffer-ready-replicas-enabled", warn, "", "no such flag in CA's code; draxr keeps as many buffer pods as status.replicas says"},
		{"node-removal-latency-tracking-enabled", warn, "", "draxr does not export CA's node removal latency metric"},
		{"max-node-skip-eval-time-tracker-enabled", warn, "", "draxr does not export CA's node skip evaluation metric"},
		{"capacity-quotas-enabled", reject, "false", "CapacityQuotas are not supported by draxr"},
		{"pending-pods-batching-timeout", warn, "", perf},
		{"enable-graceful-degradation", warn, "", perf},
		{"enable-inter-pod-affinity-hostname-fast-path", warn, "", "draxr's simulation runs the scheduler's plugins as kube-scheduler v1.37.2 ships them"},
		{"cluster-snapshot-parallelism", warn, "", perf},
		{"nodes", reject, "", "static <min>:<max>:<name> node groups are not supported: groups come from --node-group-config (local provider), Cluster API annotations (--cloud-provider=clusterapi) or the provider service (--cloud-provider=externalgrpc, which takes CA's --nodes)"},
		{"allowed-scheduler-names", warn, "", "draxr plans only for pods of the scheduler configuration's profiles and of --bypassed-scheduler-names"},
		{"drain-priority-config", reject, "", "draxr evicts a node's pods together and waits up to --max-graceful-termination-sec; priority-ordered eviction is not supported"},
		{"scheduler-verbosity", warn, "", "the simulated scheduler logs at -v"},
		{"leader-elect-resource-namespace", warn, "", "ignored, as in CA: the lease lives in --namespace"},
		{"logging-format", reject, "text", "draxr-autoscaler logs in text format only"},
		{"log-text-split-stream", warn, "", "draxr-autoscaler writes its log to one stream"},
		{"log-text-info-buffer-size", warn, "", "draxr-autoscaler writes its log to one stream"},
		{"log-json-split-stream", warn, "", "draxr-autoscaler logs in text format only"},
		{"log-json-info-buffer-size", warn, "", "draxr-autoscaler logs in text format only"},
		{"logtostderr", reject, "true", klogOut},
		{"alsologtostderr", warn, "", klogOut},
		{"alsologtostderrthreshold", warn, "", klogOut},
		{"stderrthreshold", warn, "", klogOut},
		{"legacy_stderr_threshold_behavior", warn, "", klogOut},
		{"log_dir", warn, "", klogOut},
		{"log_file", warn, "", klogOut},
		{"log_file_max_size", warn, "", klogOut},
		{"one_output", warn, "", klogOut},
		{"add_dir_header", warn, "", klogOut},
		{"skip_headers", warn, "", klogOut},
		{"skip_log_headers", warn, "", klogOut},
		{"log_backtrace_at", warn, "", klogOut},

		// Similarity tolerances of --balance-similar-node-groups: draxr
		// compares groups with CA's default tolerances.
		{"memory-difference-ratio", warn, "", "similar node groups are compared with CA's default memory tolerance (0.015); it cannot be changed"},
		{"max-free-difference-ratio", warn, "", "similar node groups are compared by template, which runs no pods; free resources are not compared"},
		{"max-allocatable-difference-ratio", warn, "", "similar node groups are compared with CA's default allocatable tolerance (0.05); it cannot be changed"},
	}
}

// compatFlags are the table's flags registered on a command.
type compatFlags struct {
	fs      *pflag.FlagSet
	entries []compatEntry
	kinds   map[string]flagKind
}

// addCompatFlags registers the table's flags on fs, hidden from --help
// (docs/flags.md lists them). A name fs already has is skipped; a test
// fails on it.
func addCompatFlags(fs *pflag.FlagSet) *compatFlags {
	c := &compatFlags{fs: fs, entries: compatTable(), kinds: map[string]flagKind{}}
	for _, f := range caFlags() {
		c.kinds[f.name] = f.kind
	}
	for _, e := range c.entries {
		if fs.Lookup(e.name) != nil {
			continue
		}
		kind := c.kinds[e.name]
		f := fs.VarPF(&compatValue{kind: kind}, e.name, "", "Cluster Autoscaler flag: "+describe(e))
		if kind == kindBool {
			f.NoOptDefVal = "true"
		}
		f.Hidden = true
	}
	return c
}

func describe(e compatEntry) string {
	switch {
	case e.action == warn:
		return "accepted with a warning, no effect: " + e.why
	case e.accept != "":
		return fmt.Sprintf("only %s is accepted (with a warning): %s", e.accept, e.why)
	}
	return "rejected: " + e.why
}

// check returns a warning for each warned flag given and an error naming
// every rejected one.
func (c *compatFlags) check() ([]string, error) {
	var warnings []string
	var errs []error
	for _, e := range c.entries {
		f := c.fs.Lookup(e.name)
		if f == nil || !f.Changed {
			continue
		}
		v, ok := f.Value.(*compatValue)
		if !ok {
			continue
		}
		if e.action == reject && !v.only(e.accept) {
			errs = append(errs, fmt.Errorf("--%s=%s is not supported by draxr-autoscaler: %s", e.name, v.String(), e.why))
			continue
		}
		warnings = append(warnings, fmt.Sprintf("--%s has no effect in draxr-autoscaler: %s", e.name, e.why))
	}
	return warnings, errors.Join(errs...)
}

// compatValue parses a value as CA would (so a typo still fails) and
// keeps every value given.
type compatValue struct {
	kind   flagKind
	values []string
}

func (v *compatValue) String() string {
	if len(v.values) == 0 {
		return ""
	}
	return v.values[len(v.values)-1]
}

func (v *compatValue) Type() string { return string(v.kind) }

func (v *compatValue) Set(s string) error {
	var err error
	switch v.kind {
	case kindBool:
		_, err = strconv.ParseBool(s)
	case kindDuration:
		_, err = time.ParseDuration(s)
	case kindInt:
		_, err = strconv.Atoi(s)
	case kindFloat:
		_, err = strconv.ParseFloat(s, 64)
	}
	if err != nil {
		return fmt.Errorf("not a %s: %w", v.kind, err)
	}
	v.values = append(v.values, s)
	return nil
}

// only reports every value given equal to want (compared as the kind
// parses); "" accepts none.
func (v *compatValue) only(want string) bool {
	if want == "" {
		return false
	}
	for _, s := range v.values {
		if !sameValue(v.kind, s, want) {
			return false
		}
	}
	return true
}

// sameValue compares two values of a kind as parsed ("10m" = "10m0s").
func sameValue(kind flagKind, a, b string) bool {
	switch kind {
	case kindBool:
		x, e1 := strconv.ParseBool(a)
		y, e2 := strconv.ParseBool(b)
		return e1 == nil && e2 == nil && x == y
	case kindDuration:
		x, e1 := time.ParseDuration(a)
		y, e2 := time.ParseDuration(b)
		return e1 == nil && e2 == nil && x == y
	case kindInt, kindFloat:
		x, e1 := strconv.ParseFloat(a, 64)
		y, e2 := strconv.ParseFloat(b, 64)
		return e1 == nil && e2 == nil && x == y
	}
	return a == b
}

// addLogFlags registers the logging flags draxr-autoscaler implements,
// component-base's -v, --vmodule and --log-flush-frequency (cli.Run adds
// them too). klog's own flags are in the compatibility table: binding
// them (klog.InitFlags) writes klog's globals, which races with logging.
func addLogFlags(fs *pflag.FlagSet) {
	logs.AddFlags(fs)
}
