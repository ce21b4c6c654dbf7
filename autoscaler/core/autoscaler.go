// Package core is draxr-autoscaler's loop: each RunOnce builds the
// cluster's snapshot, plans with the same planner the offline CLI uses,
// executes at most one scale-up, and removes nodes that have been
// unneeded long enough. It keeps only what must survive between loops
// (since when each node is unneeded); everything else is re-read.
package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"draxr.dev/draxr/autoscaler/backoff"
	"draxr.dev/draxr/autoscaler/buffers"
	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/loopstep"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/dryrun"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
	"draxr.dev/draxr/simulator/taints"
	"draxr.dev/draxr/simulator/view"
)

// Config is everything the loop needs.
type Config struct {
	Client        kubernetes.Interface
	View          view.View
	Provider      cloudprovider.Provider
	Profile       *config.KubeSchedulerProfile
	Expander      expander.Strategy
	MaxNodesTotal int
	ScaleDown     ScaleDownConfig
	Recorder      record.EventRecorder
	// Hold, when set, is called before a loop's first scale-up; false
	// says the loop is superseded (looptrigger.Trigger.Hold: later events
	// will get their own loop): it asks for no nodes and removes none.
	Hold func(context.Context) bool
	// DryRun (shadow mode) runs the whole loop and changes nothing in the
	// cluster or the cloud: the provider's changes are recorded, not made
	// (cloudprovider/dryrun), no node is tainted, drained or deleted, and
	// events go to the status ConfigMap only, marked "dry run". What it
	// would have done is in LoopResult, the status and the events.
	DryRun bool
	// StatusNamespace/StatusName locate the status ConfigMap ("" skips it).
	StatusNamespace, StatusName string
	// ClusterState are the readiness, health and backoff rules; nil takes
	// CA's defaults.
	ClusterState *ClusterStateConfig
	// Limits are the cluster-wide resource limits (maximums in scale-up,
	// minimums in scale-down, published as CA's limit metrics),
	// --max-nodes-per-scaleup and balancing of similar groups; the zero
	// value limits nothing.
	Limits limits.Options
	// Pods are CA's flags on which pending pods are planned for
	// (expendable cutoff, bypassed schedulers); nil plans for all.
	Pods *scaleup.Flags
	// NewPodScaleUpDelay: pending pods younger than this are left for a
	// later loop (CA's --new-pod-scale-up-delay; a pod's
	// cluster-autoscaler.kubernetes.io/pod-scale-up-delay annotation may
	// raise it).
	NewPodScaleUpDelay time.Duration
	// Taints are CA's taint flags (--startup-taint, --startup-taint-prefix,
	// --status-taint): a node with a startup taint is still starting.
	Taints taints.Config
	// ProvisioningRequests serves ProvisioningRequests
	// (--enable-provisioning-requests); nil leaves them alone.
	ProvisioningRequests *provisioning.Processor
	// Buffers serves CapacityBuffers (--capacity-buffer-*); nil leaves
	// them alone.
	Buffers *buffers.Config
	Now     func() time.Time
}

// ClusterStateConfig are CA's node readiness, cluster health and node
// group backoff flags. Zero durations take CA's defaults.
type ClusterStateConfig struct {
	MaxNodeProvisionTime      time.Duration
	MaxNodeStartupTime        time.Duration
	OkTotalUnreadyCount       int
	MaxTotalUnreadyPercentage float64
	InitialBackoff            time.Duration
	MaxBackoff                time.Duration
	BackoffResetTimeout       time.Duration
}

// ScaleDownConfig are the --scale-down-* flags. UnneededTime,
// UtilizationThreshold, GpuUtilizationThreshold and UnreadyTime are
// defaults a node group may override (cloudprovider.NodeGroup.GetOptions).
type ScaleDownConfig struct {
	Enabled              bool
	UnneededTime         time.Duration
	UtilizationThreshold float64
	// GpuUtilizationThreshold applies to nodes with DRA devices, whose
	// utilization is the share of their devices in use; nil takes
	// UtilizationThreshold.
	GpuUtilizationThreshold *float64
	// UtilizationIgnores leave DaemonSet or mirror pods out of a node's
	// CPU and memory utilization.
	UtilizationIgnores scaledown.UtilizationIgnores
	DelayAfterAdd      time.Duration
	// SimulationTimeout bounds one loop's search for removable nodes
	// (--scale-down-simulation-timeout, CA's 30s when zero); ScanInterval
	// is the loop's period (10s when zero), which with
	// MaxScaleDownParallelism and UnneededTime bounds how many unneeded
	// nodes are worth finding (unneededLimit).
	SimulationTimeout, ScanInterval time.Duration
	ScaleDownActuation
}

// Autoscaler runs loops. It keeps the configuration and what deliberately
// carries over from one loop to the next (since when nodes are unneeded,
// the scale-down state, backoff in the cluster state, condition times,
// pod infos); everything one loop computes belongs to its loop value
// (loop.go) and is dropped with it.
type Autoscaler struct {
	cfg           Config
	unneededSince map[string]time.Time
	lastScaleUp   time.Time
	clusterState  *clusterstate.Registry
	sd            *scaleDownState
	// provisionTime, startupTime are the flags' values (defaults filled).
	provisionTime, startupTime time.Duration
	// groupErrorsReported is each misconfigured group's last reported
	// error, so that its event is sent when it changes, not every loop.
	groupErrorsReported map[string]string
	// conditions keep the status conditions' transition times.
	conditions conditionTimes
	// dryRun records the provider changes a dry run would have made.
	dryRun *dryrun.Provider
	// podInfos carries the running pods' computed requests from one
	// loop's snapshot to the next.
	podInfos *snapshot.PodInfos
	// devices are the last loop's device counts (metrics), kept while
	// the slices and claims are the same objects.
	devices deviceCountsMemo
	// nodeDevices are the Ready group members' device groups of the last
	// loop, by node, for the template mismatch metric.
	nodeDevices map[string]nodeDevices
}

// New returns an autoscaler.
func New(cfg Config) *Autoscaler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	metrics.SetDryRun(cfg.DryRun)
	cfg.ScaleDown.ScaleDownActuation = withActuationDefaults(cfg.ScaleDown.ScaleDownActuation)
	cs := ClusterStateConfig{OkTotalUnreadyCount: clusterstate.DefaultOkTotalUnreadyCount,
		MaxTotalUnreadyPercentage: clusterstate.DefaultMaxTotalUnreadyPercentage}
	if cfg.ClusterState != nil {
		cs = *cfg.ClusterState
	}
	if cs.MaxNodeProvisionTime == 0 {
		cs.MaxNodeProvisionTime = clusterstate.DefaultMaxNodeProvisionTime
	}
	if cs.MaxNodeStartupTime == 0 {
		cs.MaxNodeStartupTime = clusterstate.DefaultMaxNodeStartupTime
	}
	statusName := cfg.StatusName
	if statusName == "" {
		statusName = DefaultStatusConfigMapName
	}
	var dryRunProvider *dryrun.Provider
	statusObject := &v1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: statusName, Namespace: cfg.StatusNamespace}}
	if cfg.DryRun {
		dryRunProvider = dryrun.Wrap(cfg.Provider)
		cfg.Provider = dryRunProvider
		if cfg.Recorder != nil {
			cfg.Recorder = &dryRunRecorder{EventRecorder: cfg.Recorder, status: statusObject}
		}
	}
	var bypassed []string
	if cfg.Pods != nil {
		bypassed = cfg.Pods.BypassedSchedulerNames
	}
	registry := clusterstate.NewRegistry(clusterstate.RegistryConfig{
		BindingTimeout:         placement.BindingTimeout(cfg.Profile),
		BypassedSchedulerNames: bypassed,
		Taints:                 cfg.Taints,
		Prices:                 cfg.Expander != nil && expander.UsesPrice(cfg.Expander.Name()),
		MaxNodeProvisionTime:   cs.MaxNodeProvisionTime, MaxNodeStartupTime: cs.MaxNodeStartupTime,
		OkTotalUnreadyCount: cs.OkTotalUnreadyCount, MaxTotalUnreadyPercentage: cs.MaxTotalUnreadyPercentage,
		Backoff:  backoff.New(cs.InitialBackoff, cs.MaxBackoff, cs.BackoffResetTimeout),
		Recorder: cfg.Recorder,
		// CA records cluster-level events on its status ConfigMap.
		EventObject: statusObject,
	})
	return &Autoscaler{cfg: cfg, unneededSince: map[string]time.Time{}, sd: newScaleDownState(), clusterState: registry,
		dryRun: dryRunProvider, podInfos: snapshot.NewPodInfos(),
		conditions: conditionTimes{}, provisionTime: cs.MaxNodeProvisionTime, startupTime: cs.MaxNodeStartupTime}
}

// LoopResult says what one loop decided and did.
type LoopResult struct {
	Unschedulable int
	Upcoming      map[string]int
	ScaleUp       *scaleup.ScaleUp // executed, nil if none
	// ScaleUps are every group's executed scale-up: ScaleUp's first, then
	// the similar groups it was balanced with.
	ScaleUps  []scaleup.ScaleUp
	NoScaleUp []scaleup.NoScaleUp
	Unneeded  []string
	Removed   []string
	// ScaleDown says, of every node of an autoscaled group, what this
	// loop's scale-down made of it (set when scale-down ran).
	ScaleDown []scaledown.NodeVerdict
	// FailedScaleUps are the groups whose IncreaseSize failed this loop
	// (the plan then fell back to the next group).
	FailedScaleUps []string
	// GivenUp are nodes that did not come up in time, removed this loop.
	GivenUp []string
	// Healthy is false when too many nodes are unready (scale-down paused).
	Healthy bool
	// GroupErrors are the objects that are not node groups this loop and
	// why (a bad annotation), by the provider's object ID.
	GroupErrors map[string]string
	// DryRun is set in a dry run: ScaleUps and Removed are what the loop
	// would have done, WouldCall the provider calls it did not make.
	DryRun    bool
	WouldCall []string
	// ProvisioningRequests are the requests decided this loop.
	ProvisioningRequests []provreq.Report
	// Superseded is set when events after the loop started made it give
	// up its scale-up (Config.Hold): it asked for no nodes and removed
	// none; the loop of those events decides.
	Superseded bool
	// BufferPods counts the CapacityBuffers' pods this loop kept room for.
	BufferPods int
}

// Productive is true when the loop scaled up, removed nodes or decided a
// ProvisioningRequest: with frequent loops the next one starts at once, as
// in CA, since what this one changed may let it do more. A dry run is
// never productive: it changed nothing, so the next loop would only decide
// the same again.
func (r *LoopResult) Productive() bool {
	return r != nil && !r.DryRun && (r.ScaleUp != nil || len(r.ScaleUps) > 0 || len(r.Removed) > 0 || len(r.ProvisioningRequests) > 0)
}

// readClusterState reads the loop's state; with act, the cluster state's
// recommendations (delete what did not come up, give back a timed-out
// scale-up, back off) are applied first, so the state counts their
// outcome. Without, nothing is written anywhere.
func (a *Autoscaler) readClusterState(ctx context.Context, act bool) (*clusterstate.State, error) {
	as, err := a.clusterState.Assess(a.cfg.View, a.cfg.Provider, a.cfg.Now())
	if err != nil {
		return nil, err
	}
	if act {
		ApplyClusterActions(ctx, a.clusterState, as.Actions, a.cfg.Now())
	}
	return a.clusterState.State(as)
}

// waitingForBinding says of each pod the scheduler is binding whose
// claims wait for device binding conditions that it gets no scale-up, and
// why: it is being bound on its node until the conditions are met, fail
// or time out (then it is pending again).
func waitingForBinding(st *clusterstate.State) []scaleup.NoScaleUp {
	if len(st.WaitingForBinding) == 0 {
		return nil
	}
	return scaleup.WaitingForBinding(st.AllPods, func(p *v1.Pod) (string, bool) {
		w, ok := st.WaitingForBinding[p.UID]
		if !ok || p.Spec.NodeName != "" {
			return "", false
		}
		return w.Reason(), true
	})
}

// planner is the loop's planner over h for groups.
func (a *Autoscaler) planner(sim *placement.Engine, st *clusterstate.State, groups []*nodegroup.NodeGroup) *scaleup.Planner {
	return scaleup.NewPlanner(sim, scaleup.Config{Groups: groups, Expander: a.cfg.Expander, MaxNodesTotal: a.cfg.MaxNodesTotal,
		DaemonSets: st.Objects.DaemonSets, Limits: a.cfg.Limits, Pods: a.cfg.Pods, Gangs: st.Gangs})
}

// clusterUnhealthy reports, as CA does, that scale-down is paused.
func (a *Autoscaler) clusterUnhealthy(st *clusterstate.State) {
	r := st.Readiness
	a.clusterState.Event(v1.EventTypeWarning, clusterstate.EventClusterUnhealthy,
		"Cluster is unhealthy: %d of %d nodes unready (--ok-total-unready-count, --max-total-unready-percentage); scale-down paused",
		r.Unready, r.Ready+r.Unready+r.NotStarted)
}

// scaleUp plans for the unschedulable pods and executes the plan's first
// step, as one loop of the Cluster Autoscaler would. Groups backed off or
// unhealthy are left out of the plan; a group whose IncreaseSize fails is
// backed off and the plan is made again without it, in this same loop.
func (l *loop) scaleUp(ctx context.Context) error {
	st, res := l.st, l.res
	groups := st.ScaleUpEligible()
	excluded := map[string]string{}
	for g, why := range st.NotForScaleUp {
		excluded[g] = why
	}
	var errs []error
	for {
		done, err := l.scaleUpOnce(ctx, groups, excluded)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			return errors.Join(errs...)
		}
		failed := res.FailedScaleUps[len(res.FailedScaleUps)-1]
		groups = slices.DeleteFunc(groups, func(g *nodegroup.NodeGroup) bool { return g.Name == failed })
	}
}

// scaleUpOnce plans with groups and asks the chosen group for nodes. It
// returns done=false when that group's IncreaseSize failed (recorded in
// res.FailedScaleUps and excluded), so the caller plans again.
func (l *loop) scaleUpOnce(ctx context.Context, groups []*nodegroup.NodeGroup, excluded map[string]string) (bool, error) {
	st, res := l.st, l.res
	start := time.Now()
	sim, err := l.SharedSimulation(ctx)
	if err != nil {
		metrics.RegisterError(metrics.ErrorInternal)
		return true, err
	}
	sim.Snapshot().Fork()
	defer sim.Snapshot().Revert()
	p := l.planner(sim, st, groups)
	// A plan of many thousands of pods stops when the process is told to
	// (SIGTERM ends ctx): nothing is asked of the cloud after that.
	pending := oldEnough(ctx, st.Unschedulable, l.cfg.NewPodScaleUpDelay, l.cfg.Now())
	// After every real pod (they were created now): real pods take free
	// room first, a buffer's pods the rest, or new nodes.
	pending = append(pending, l.buffers.Unplaced()...)
	plan, err := p.PlanContext(ctx, pending)
	metrics.UpdateDurationFromStart(metrics.FunctionEstimate, start)
	if err != nil {
		if ctx.Err() == nil {
			metrics.RegisterError(metrics.ErrorInternal)
		}
		return true, err
	}
	l.maxNodesTotalReached(plan.NoScaleUp)
	pods := podsByUID(st.Unschedulable)
	bufferEvents := buffers.NewEvents(l.buffers, l.cfg.Recorder)
	if l.buffers != nil {
		for _, p := range l.buffers.Pods {
			pods[p.UID] = p
		}
	}
	defer bufferEvents.Emit()
	var missing []error
	if len(plan.ScaleUps) == 0 {
		res.NoScaleUp = plan.NoScaleUp
		missing = l.notTriggered(plan.NoScaleUp, pods, bufferEvents, excludedText(excluded))
		return true, errors.Join(missing...)
	}
	step := plan.FirstLoop // this loop's scale-up only: later loops' nodes wait for them
	if len(step) == 0 {
		step = plan.ScaleUps[:1]
	}
	r := l.executeStep(ctx, st, step, pods, res, false)
	if r.superseded {
		return true, nil
	}
	if r.err != nil {
		missing = append(missing, r.err)
	}
	if len(r.done) == 0 {
		if r.failed == "" {
			return true, errors.Join(missing...)
		}
		// The pods are planned again without the group and get
		// TriggeredScaleUp or NotTriggerScaleUp from that plan.
		excluded[r.failed] = fmt.Sprintf("in backoff after failed scale-up until %s", r.backoffUntil.UTC().Format(time.RFC3339))
		return false, errors.Join(missing...)
	}
	texts := make([]string, len(r.done))
	for i, g := range r.done {
		texts[i] = g.String()
	}
	groupsText := strings.Join(texts, " ")
	helped := r.helped
	res.NoScaleUp = plan.NoScaleUp
	missing = append(missing, l.notTriggered(plan.NoScaleUp, pods, bufferEvents, "")...)
	for _, pod := range helped {
		if !bufferEvents.Triggered(pod, groupsText) {
			l.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, EventTriggeredScaleUp, "pod triggered scale-up: [%s]", groupsText)
		}
	}
	return true, errors.Join(missing...)
}

// notTriggered sends each pod the plan gives no node CA's
// NotTriggerScaleUp event with its reason and notConsidered (the groups
// left out, or ""); a buffer's pods count toward the buffer's one event.
// The plan's references to pods not among pods are returned as errors.
func (l *loop) notTriggered(noScaleUp []scaleup.NoScaleUp, pods podIndex, bufferEvents *buffers.Events, notConsidered string) []error {
	var missing []error
	for _, n := range noScaleUp {
		pod, err := pods.get(n.Pod)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		if bufferEvents.NotTriggered(pod, n.Reason) {
			continue
		}
		l.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, EventNotTriggerScaleUp, "pod didn't trigger scale-up: %s%s", n.Reason, notConsidered)
	}
	return missing
}

// recordScaleUp records one group's executed scale-up: cluster state,
// CA's ScaledUpGroup event and metrics, draxr's device metrics.
func (a *Autoscaler) recordScaleUp(su scaleup.ScaleUp, target, maxSize int, helped []*v1.Pod, st *clusterstate.State, res *LoopResult) {
	a.clusterState.RegisterScaleUp(su.NodeGroup, su.NewNodes, a.cfg.Now())
	a.clusterState.Event(v1.EventTypeNormal, EventScaledUpGroup, "Scale-up: setting group %s size to %d instead of %d (max: %d)",
		su.NodeGroup, target+su.NewNodes, target, maxSize)
	metrics.RegisterScaleUp(su.NewNodes, a.clusterState.Labels(su.NodeGroup))
	metrics.RegisterPlannedDevices(plannedDevices(&su))
	metrics.RegisterExtendedResourcePodsHelped(extendedResourcePods(helped, st.Objects.DeviceClasses))
	a.lastScaleUp = a.cfg.Now()
	res.ScaleUps = append(res.ScaleUps, su)
}

// Event reasons of the loop's own events, CA's. Pod events:
// TriggeredScaleUp and NotTriggerScaleUp; status ConfigMap events:
// ScaledUpGroup and MaxNodesTotalReached (the others come from
// clusterstate and scale-down).
const (
	EventTriggeredScaleUp     = loopstep.EventTriggeredScaleUp
	EventNotTriggerScaleUp    = loopstep.EventNotTriggerScaleUp
	EventScaledUpGroup        = "ScaledUpGroup"
	EventMaxNodesTotalReached = "MaxNodesTotalReached"
	EventScaleDownEmpty       = "ScaleDownEmpty"
)

// maxNodesTotalReached reports on the status ConfigMap, as CA does, that
// --max-nodes-total kept pods pending this loop.
func (a *Autoscaler) maxNodesTotalReached(noScaleUp []scaleup.NoScaleUp) {
	for _, n := range noScaleUp {
		if n.Code == scaleup.MaxNodesTotalReached {
			a.clusterState.Event(v1.EventTypeWarning, EventMaxNodesTotalReached, "Max total nodes in cluster reached: %d", a.cfg.MaxNodesTotal)
			return
		}
	}
}

// scaleDownInCooldown is CA's scale_down_in_cooldown: a scale-up, node
// removal or failed removal happened within its delay.
func (a *Autoscaler) scaleDownInCooldown() bool {
	now := a.cfg.Now()
	a.sd.mu.Lock()
	defer a.sd.mu.Unlock()
	return now.Sub(a.lastScaleUp) < a.cfg.ScaleDown.DelayAfterAdd ||
		now.Sub(a.sd.lastDelete) < a.cfg.ScaleDown.DelayAfterDelete ||
		now.Sub(a.sd.lastFailure) < a.cfg.ScaleDown.DelayAfterFailure
}

// recordLoopMetrics publishes what the loop decided.
func (a *Autoscaler) recordLoopMetrics(res *LoopResult) {
	metrics.UpdateUnneededNodesCount(len(res.Unneeded))
	unhelpable := map[string]int{}
	for _, n := range res.NoScaleUp {
		unhelpable[string(n.Code)]++
	}
	metrics.UpdateUnhelpablePods(unhelpable)
	a.sd.mu.Lock()
	metrics.ObservePendingNodeDeletions(len(a.sd.deleting))
	a.sd.mu.Unlock()
}

// excludedText lists the groups left out of the plan and why, for
// NotTriggerScaleUp events.
func excludedText(excluded map[string]string) string {
	if len(excluded) == 0 {
		return ""
	}
	names := make([]string, 0, len(excluded))
	for g := range excluded {
		names = append(names, g)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("; node groups not considered:")
	for _, g := range names {
		fmt.Fprintf(&b, " %s (%s)", g, excluded[g])
	}
	return b.String()
}

// podIndex finds the loop's pending pods by the plan's references.
type podIndex map[types.UID]*v1.Pod

func podsByUID(pods []*v1.Pod) podIndex {
	idx := make(podIndex, len(pods))
	for _, p := range pods {
		idx[p.UID] = p
	}
	return idx
}

// get returns the referenced pod. The plan is made from these very pods,
// so a miss is a bug to report, never a pod to skip quietly.
func (idx podIndex) get(ref scaleup.PodRef) (*v1.Pod, error) {
	pod, ok := idx[ref.UID]
	if !ok || pod.Namespace != ref.Namespace || pod.Name != ref.Name {
		metrics.RegisterError(metrics.ErrorInternal)
		return nil, fmt.Errorf("plan names pod %s (uid %q), which is not among this loop's pending pods", ref, ref.UID)
	}
	return pod, nil
}

// groupOptions returns, for a group ID, that group's options: the flags
// with its own overrides. A group whose GetOptions fails, or one not
// known, runs with the flags; the error is logged and counted.
func (a *Autoscaler) groupOptions(ctx context.Context) func(group string) cloudprovider.NodeGroupOptions {
	defaults := cloudprovider.NodeGroupOptions{
		ScaleDownUtilizationThreshold:    a.cfg.ScaleDown.UtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: a.cfg.ScaleDown.UtilizationThreshold,
		ScaleDownUnneededTime:            a.cfg.ScaleDown.UnneededTime,
		ScaleDownUnreadyTime:             a.cfg.ScaleDown.UnreadyTime,
		MaxNodeProvisionTime:             a.provisionTime,
		MaxNodeStartupTime:               a.startupTime,
	}
	if t := a.cfg.ScaleDown.GpuUtilizationThreshold; t != nil {
		defaults.ScaleDownGpuUtilizationThreshold = *t
	}
	byGroup := map[string]cloudprovider.NodeGroupOptions{}
	for _, g := range a.cfg.Provider.NodeGroups() {
		o, err := cloudprovider.OptionsOf(g, defaults)
		if err != nil {
			metrics.RegisterError(metrics.ErrorConfiguration)
			klog.FromContext(ctx).Error(err, "Node group options; the flags apply", "nodeGroup", g.Id())
		}
		byGroup[g.Id()] = o
	}
	return func(group string) cloudprovider.NodeGroupOptions {
		if o, ok := byGroup[group]; ok {
			return o
		}
		return defaults
	}
}

func (a *Autoscaler) group(id string) cloudprovider.NodeGroup {
	for _, g := range a.cfg.Provider.NodeGroups() {
		if g.Id() == id {
			return g
		}
	}
	return nil
}

// PodScaleUpDelayAnnotation raises --new-pod-scale-up-delay for one pod
// (CA's annotation).
const PodScaleUpDelayAnnotation = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"

// oldEnough leaves out pods younger than their scale-up delay, as CA does:
// the delay is --new-pod-scale-up-delay, or the pod's annotation when that
// is a duration not below it.
func oldEnough(ctx context.Context, pods []*v1.Pod, delay time.Duration, now time.Time) []*v1.Pod {
	if delay <= 0 && !anyAnnotated(pods) {
		return pods
	}
	logger := klog.FromContext(ctx)
	out := make([]*v1.Pod, 0, len(pods))
	for _, pod := range pods {
		d := delay
		if v, ok := pod.Annotations[PodScaleUpDelayAnnotation]; ok {
			ad, err := time.ParseDuration(v)
			switch {
			case err != nil:
				logger.Error(err, "Pod scale-up delay annotation is not a duration; using --new-pod-scale-up-delay", "pod", klog.KObj(pod), "annotation", PodScaleUpDelayAnnotation)
			case ad < delay:
				logger.Error(nil, "Pod scale-up delay annotation is below --new-pod-scale-up-delay, which applies", "pod", klog.KObj(pod), "annotation", ad, "delay", delay)
			default:
				d = ad
			}
		}
		if now.Sub(pod.CreationTimestamp.Time) > d {
			out = append(out, pod)
		} else {
			logger.V(3).Info("Pod is too new to trigger a scale-up", "pod", klog.KObj(pod), "delay", d)
		}
	}
	return out
}

func anyAnnotated(pods []*v1.Pod) bool {
	for _, p := range pods {
		if _, ok := p.Annotations[PodScaleUpDelayAnnotation]; ok {
			return true
		}
	}
	return false
}
