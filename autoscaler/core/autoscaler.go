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
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/harness"
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
	Now                         func() time.Time
}

// ScaleDownConfig are the --scale-down-* flags.
type ScaleDownConfig struct {
	Enabled              bool
	UnneededTime         time.Duration
	UtilizationThreshold float64
	DelayAfterAdd        time.Duration
}

// Autoscaler runs loops.
type Autoscaler struct {
	cfg           Config
	unneededSince map[string]time.Time
	lastScaleUp   time.Time
}

// New returns an autoscaler.
func New(cfg Config) *Autoscaler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	metrics.Register()
	return &Autoscaler{cfg: cfg, unneededSince: map[string]time.Time{}}
}

// LoopResult says what one loop decided and did.
type LoopResult struct {
	Unschedulable int
	Upcoming      map[string]int
	ScaleUp       *scaleup.ScaleUp // executed, nil if none
	NoScaleUp     []scaleup.NoScaleUp
	Unneeded      []string
	Removed       []string
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
	st, err := clusterstate.Build(a.cfg.Listers, a.cfg.Provider)
	if err != nil {
		metrics.Errors.WithLabelValues("snapshot").Inc()
		return nil, err
	}
	res := &LoopResult{Unschedulable: len(st.Unschedulable), Upcoming: st.Upcoming}
	metrics.UnschedulablePods.Set(float64(len(st.Unschedulable)))

	var runErr error
	if len(st.Unschedulable) > 0 {
		runErr = a.scaleUp(ctx, st, res)
	}
	if runErr == nil && res.ScaleUp == nil && a.cfg.ScaleDown.Enabled && a.cfg.Now().Sub(a.lastScaleUp) >= a.cfg.ScaleDown.DelayAfterAdd {
		runErr = a.scaleDown(ctx, st, res)
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

// scaleUp plans for the unschedulable pods and executes the plan's first
// step, as one loop of the Cluster Autoscaler would.
func (a *Autoscaler) scaleUp(ctx context.Context, st *clusterstate.State, res *LoopResult) error {
	start := a.cfg.Now()
	h, err := a.simulation(ctx, st)
	if err != nil {
		return err
	}
	p := &scaleup.Planner{Harness: h, Groups: st.Groups, Expander: a.cfg.Expander, MaxNodesTotal: a.cfg.MaxNodesTotal}
	plan, err := p.Plan(st.Unschedulable)
	metrics.SimulationDuration.WithLabelValues("scale-up").Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	res.NoScaleUp = plan.NoScaleUp
	pods := podsByUID(st.Unschedulable)
	var missing []error
	for _, n := range plan.NoScaleUp {
		pod, err := pods.get(n.Pod)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		a.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, "NotTriggerScaleUp", "pod didn't trigger scale-up: %s", n.Reason)
	}
	if len(plan.ScaleUps) == 0 {
		return errors.Join(missing...)
	}
	su := plan.ScaleUps[0]
	group := a.group(su.NodeGroup)
	if group == nil {
		return errors.Join(append(missing, fmt.Errorf("plan names unknown node group %s", su.NodeGroup))...)
	}
	target, err := group.TargetSize()
	if err != nil {
		return errors.Join(append(missing, fmt.Errorf("node group %s: target size: %w", su.NodeGroup, err))...)
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
		for _, pod := range helped {
			a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedScaleUp", "node group %s: %v", su.NodeGroup, err)
		}
		return errors.Join(append(missing, fmt.Errorf("scale up node group %s by %d: %w", su.NodeGroup, su.NewNodes, err))...)
	}
	metrics.ScaleUps.WithLabelValues(su.NodeGroup).Add(float64(su.NewNodes))
	a.lastScaleUp = a.cfg.Now()
	res.ScaleUp = &su
	for _, pod := range helped {
		a.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, "TriggeredScaleUp", "pod triggered scale-up: [{%s %d->%d (max: %d)}]",
			su.NodeGroup, target, target+su.NewNodes, group.MaxSize())
	}
	return errors.Join(missing...)
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
