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
	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/harness"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/scaleup"
)

// Config is everything the loop needs.
type Config struct {
	Client        kubernetes.Interface
	Listers       clusterstate.Listers
	Provider      cloudprovider.Provider
	Profile       *config.KubeSchedulerProfile
	Expander      expander.Strategy
	MaxNodesTotal int
	ScaleDown     ScaleDownConfig
	Recorder      record.EventRecorder
	// StatusNamespace/StatusName locate the status ConfigMap ("" skips it).
	StatusNamespace, StatusName string
	// ClusterState are the readiness, health and backoff rules; nil takes
	// CA's defaults.
	ClusterState *ClusterStateConfig
	// Pods are CA's flags on which pending pods are planned for
	// (expendable cutoff, bypassed schedulers); nil plans for all.
	Pods *scaleup.Flags
	// NewPodScaleUpDelay: pending pods younger than this are left for a
	// later loop (CA's --new-pod-scale-up-delay; a pod's
	// cluster-autoscaler.kubernetes.io/pod-scale-up-delay annotation may
	// raise it).
	NewPodScaleUpDelay time.Duration
	Now                func() time.Time
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

// ScaleDownConfig are the --scale-down-* flags.
type ScaleDownConfig struct {
	Enabled              bool
	UnneededTime         time.Duration
	UtilizationThreshold float64
	DelayAfterAdd        time.Duration
	ScaleDownActuation
}

// Autoscaler runs loops.
type Autoscaler struct {
	cfg           Config
	unneededSince map[string]time.Time
	lastScaleUp   time.Time
	clusterState  *clusterstate.Registry
	sd            *scaleDownState
	// groupErrorsReported is each misconfigured group's last reported
	// error, so that its event is sent when it changes, not every loop.
	groupErrorsReported map[string]string
}

// New returns an autoscaler.
func New(cfg Config) *Autoscaler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	metrics.Register()
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
		statusName = "draxr-autoscaler-status"
	}
	var bypassed []string
	if cfg.Pods != nil {
		bypassed = cfg.Pods.BypassedSchedulerNames
	}
	registry := clusterstate.NewRegistry(clusterstate.RegistryConfig{
		BypassedSchedulerNames: bypassed,
		MaxNodeProvisionTime:   cs.MaxNodeProvisionTime, MaxNodeStartupTime: cs.MaxNodeStartupTime,
		OkTotalUnreadyCount: cs.OkTotalUnreadyCount, MaxTotalUnreadyPercentage: cs.MaxTotalUnreadyPercentage,
		Backoff:  backoff.New(cs.InitialBackoff, cs.MaxBackoff, cs.BackoffResetTimeout),
		Recorder: cfg.Recorder,
		// CA records cluster-level events on its status ConfigMap.
		EventObject: &v1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: statusName, Namespace: cfg.StatusNamespace}},
	})
	return &Autoscaler{cfg: cfg, unneededSince: map[string]time.Time{}, sd: newScaleDownState(), clusterState: registry}
}

// LoopResult says what one loop decided and did.
type LoopResult struct {
	Unschedulable int
	Upcoming      map[string]int
	ScaleUp       *scaleup.ScaleUp // executed, nil if none
	NoScaleUp     []scaleup.NoScaleUp
	Unneeded      []string
	Removed       []string
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
}

// RunOnce runs one loop. Errors from the provider are reported and
// returned; the caller keeps looping.
func (a *Autoscaler) RunOnce(ctx context.Context) (*LoopResult, error) {
	start := a.cfg.Now()
	defer func() { metrics.LoopDuration.Observe(time.Since(start).Seconds()) }()
	logger := klog.FromContext(ctx)

	if err := a.cfg.Provider.Refresh(ctx); err != nil {
		metrics.Errors.WithLabelValues("refresh").Inc()
		return nil, err
	}
	st, err := a.clusterState.Update(ctx, a.cfg.Listers, a.cfg.Provider, a.cfg.Now())
	if err != nil {
		metrics.Errors.WithLabelValues("snapshot").Inc()
		return nil, err
	}
	for _, err := range st.Errors {
		// One node or group: reported, the loop goes on for the others.
		metrics.Errors.WithLabelValues("node-group").Inc()
		logger.Error(err, "Cluster state")
	}
	if err := a.scaleDownHousekeeping(ctx, st); err != nil {
		logger.Error(err, "Removing stale scale-down taints")
	}
	res := &LoopResult{Unschedulable: len(st.Unschedulable), Upcoming: st.Upcoming, GivenUp: st.GivenUp, Healthy: st.Healthy}
	metrics.UnschedulablePods.Set(float64(len(st.Unschedulable)))
	a.reportGroupErrors(ctx, res)
	if !st.Healthy {
		a.clusterUnhealthy(st)
	}

	var runErr error
	if len(st.Unschedulable) > 0 {
		runErr = a.scaleUp(ctx, st, res)
	}
	// Scale-down goes on while a group fails to scale up, but not while
	// the cluster is unhealthy.
	if st.Healthy && res.ScaleUp == nil && a.cfg.ScaleDown.Enabled && a.cfg.Now().Sub(a.lastScaleUp) >= a.cfg.ScaleDown.DelayAfterAdd {
		runErr = errors.Join(runErr, a.scaleDown(ctx, st, res))
	}
	a.writeStatus(ctx, st, res, runErr)
	logger.V(2).Info("Loop done", "unschedulable", res.Unschedulable, "upcoming", res.Upcoming,
		"scaleUp", res.ScaleUp != nil, "unneeded", len(res.Unneeded), "removed", res.Removed, "err", runErr)
	return res, runErr
}

// simulation builds a fresh snapshot and harness for this loop's state.
func (a *Autoscaler) simulation(ctx context.Context, st *clusterstate.State) (*harness.Harness, error) {
	snap, err := offline.BuildSnapshot(st.Objects)
	if err != nil {
		return nil, err
	}
	return harness.New(ctx, snap, a.cfg.Profile)
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
func (a *Autoscaler) scaleUp(ctx context.Context, st *clusterstate.State, res *LoopResult) error {
	groups := st.ScaleUpEligible()
	excluded := map[string]string{}
	for g, why := range st.NotForScaleUp {
		excluded[g] = why
	}
	var errs []error
	for {
		done, err := a.scaleUpOnce(ctx, st, groups, excluded, res)
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
func (a *Autoscaler) scaleUpOnce(ctx context.Context, st *clusterstate.State, groups []*nodegroup.NodeGroup,
	excluded map[string]string, res *LoopResult) (bool, error) {
	start := a.cfg.Now()
	h, err := a.simulation(ctx, st)
	if err != nil {
		return true, err
	}
	p := &scaleup.Planner{Harness: h, Groups: groups, Expander: a.cfg.Expander, MaxNodesTotal: a.cfg.MaxNodesTotal,
		DaemonSets: st.Objects.DaemonSets}
	if a.cfg.Pods != nil {
		a.cfg.Pods.Apply(p)
	}
	plan, err := p.Plan(oldEnough(ctx, st.Unschedulable, a.cfg.NewPodScaleUpDelay, a.cfg.Now()))
	metrics.SimulationDuration.WithLabelValues("scale-up").Observe(time.Since(start).Seconds())
	if err != nil {
		return true, err
	}
	pods := podsByUID(st.Unschedulable)
	var missing []error
	if len(plan.ScaleUps) == 0 {
		res.NoScaleUp = plan.NoScaleUp
		notConsidered := excludedText(excluded)
		for _, n := range plan.NoScaleUp {
			pod, err := pods.get(n.Pod)
			if err != nil {
				missing = append(missing, err)
				continue
			}
			a.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, "NotTriggerScaleUp", "pod didn't trigger scale-up: %s%s", n.Reason, notConsidered)
		}
		return true, errors.Join(missing...)
	}
	su := plan.ScaleUps[0]
	group := a.group(su.NodeGroup)
	if group == nil {
		return true, fmt.Errorf("plan names unknown node group %s", su.NodeGroup)
	}
	target, err := group.TargetSize()
	if err != nil {
		return true, fmt.Errorf("node group %s: target size: %w", su.NodeGroup, err)
	}
	helped := make([]*v1.Pod, 0, len(su.Pods))
	for _, ref := range su.Pods {
		pod, err := pods.get(ref)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		helped = append(helped, pod)
	}
	if err := group.IncreaseSize(ctx, su.NewNodes); err != nil {
		metrics.Errors.WithLabelValues("scale-up").Inc()
		until := a.clusterState.RegisterFailedScaleUp(su.NodeGroup, err, a.cfg.Now())
		for _, pod := range helped {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedScaleUp", "node group %s: %v", su.NodeGroup, err)
		}
		res.FailedScaleUps = append(res.FailedScaleUps, su.NodeGroup)
		excluded[su.NodeGroup] = fmt.Sprintf("in backoff after failed scale-up until %s", until.UTC().Format(time.RFC3339))
		return false, errors.Join(append(missing, fmt.Errorf("scale up node group %s by %d: %w", su.NodeGroup, su.NewNodes, err))...)
	}
	a.clusterState.RegisterScaleUp(su.NodeGroup, su.NewNodes, a.cfg.Now())
	metrics.ScaleUps.WithLabelValues(su.NodeGroup).Add(float64(su.NewNodes))
	a.lastScaleUp = a.cfg.Now()
	res.ScaleUp = &su
	res.NoScaleUp = plan.NoScaleUp
	for _, n := range plan.NoScaleUp {
		if pod, err := pods.get(n.Pod); err == nil {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, "NotTriggerScaleUp", "pod didn't trigger scale-up: %s", n.Reason)
		} else {
			missing = append(missing, err)
		}
	}
	for _, pod := range helped {
		a.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: [{%s %d->%d (max: %d)}]",
			su.NodeGroup, target, target+su.NewNodes, group.MaxSize())
	}
	return true, errors.Join(missing...)
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
		metrics.Errors.WithLabelValues("plan").Inc()
		return nil, fmt.Errorf("plan names pod %s (uid %q), which is not among this loop's pending pods", ref, ref.UID)
	}
	return pod, nil
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
