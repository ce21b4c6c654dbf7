package core

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/buffers"
	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/simulator/placement"
)

// loop is one RunOnce: everything one loop computes, dropped when it
// returns, so nothing of it can leak into the next loop. It reads the
// configuration and what carries over through its Autoscaler.
type loop struct {
	*Autoscaler
	st  *clusterstate.State
	res *LoopResult
	// errs are every step's errors in the order raised; joined, they are
	// the loop's error: returned, logged and in the status ConfigMap.
	errs []error
	// requests is this loop's view of the ProvisioningRequests (nil when
	// they are not served): every simulation books their capacity.
	requests *provisioning.Loop
	// buffers is this loop's CapacityBuffers, their pods and where those
	// stand in the shared simulation (nil when not served).
	buffers *buffers.Loop
	// shared is this loop's one simulation, built on first use: the
	// requests' step books and decides in it, the buffers' step places
	// its pods; scale-up and scale-down fork it and revert what they
	// change.
	shared *placement.Engine
	// held says Config.Hold was asked, before the loop's first scale-up.
	held bool
}

// holdForBatch asks Config.Hold, once a loop, before its first scale-up;
// false when the loop is superseded.
func (l *loop) holdForBatch(ctx context.Context) bool {
	if !l.held {
		l.held = true
		l.res.Superseded = l.cfg.Hold != nil && !l.cfg.Hold(ctx)
	}
	return !l.res.Superseded
}

// newLoop starts a loop over the cluster state st.
func (a *Autoscaler) newLoop(st *clusterstate.State) *loop {
	return &loop{Autoscaler: a, st: st,
		res: &LoopResult{Unschedulable: len(st.Unschedulable), Upcoming: st.Upcoming, GivenUp: st.GivenUp, Healthy: st.Healthy}}
}

// fail records a step's error as one of the loop's; nil is no error.
func (l *loop) fail(err error) {
	if err != nil {
		l.errs = append(l.errs, err)
	}
}

// err is the loop's error: every step's, joined.
func (l *loop) err() error { return errors.Join(l.errs...) }

// RunOnce runs one loop: the cluster state (with its timers' actions),
// the ProvisioningRequests, the CapacityBuffers, the pending pods'
// scale-up and scale-down, in that order. Errors from the provider are
// reported and returned; the caller keeps looping.
func (a *Autoscaler) RunOnce(ctx context.Context) (*LoopResult, error) {
	start := time.Now()
	metrics.UpdateLastTime(metrics.FunctionMain, a.cfg.Now())
	defer metrics.UpdateDurationFromStart(metrics.FunctionMain, start)

	l, err := a.startLoop(ctx)
	if err != nil {
		return nil, err
	}
	l.serveRequests(ctx)
	l.serveBuffers(ctx)
	l.scaleUpPods(ctx)
	if !l.res.Superseded {
		l.scaleDownNodes(ctx)
	}
	return l.finish(ctx)
}

// startLoop refreshes the provider and reads the cluster state, applying
// its recommendations (timed-out nodes and scale-ups, backoff) first. An
// error here ends the loop: there is no state to decide on.
func (a *Autoscaler) startLoop(ctx context.Context) (*loop, error) {
	refreshStart := time.Now()
	err := a.cfg.Provider.Refresh(ctx)
	metrics.UpdateDurationFromStart(metrics.FunctionRefresh, refreshStart)
	if err != nil {
		metrics.RegisterError(metrics.ErrorCloudProvider)
		return nil, err
	}
	updateStart := time.Now()
	st, err := a.readClusterState(ctx, true)
	metrics.UpdateDurationFromStart(metrics.FunctionUpdateState, updateStart)
	if err != nil {
		metrics.RegisterError(metrics.ErrorAPICall)
		return nil, err
	}
	metrics.UpdateLastTime(metrics.FunctionAutoscaling, a.cfg.Now())
	logger := klog.FromContext(ctx)
	for _, err := range st.Errors {
		// One node or group: reported, the loop goes on for the others.
		metrics.RegisterError(metrics.ErrorCloudProvider)
		logger.Error(err, "Cluster state")
	}
	if err := a.scaleDownHousekeeping(ctx, st); err != nil {
		logger.Error(err, "Removing stale scale-down taints")
	}
	l := a.newLoop(st)
	a.reportGroupErrors(ctx, l.res)
	if !st.Healthy {
		a.clusterUnhealthy(st)
	}
	return l, nil
}

// serveBuffers is the loop's CapacityBuffer step (its room:
// autoscaler/buffers): the buffers' pods, those that fit placed in the
// shared simulation for scale-up and scale-down alike.
func (l *loop) serveBuffers(ctx context.Context) {
	if l.cfg.Buffers == nil {
		return
	}
	b, err := buffers.Serve(ctx, *l.cfg.Buffers, l)
	l.fail(err)
	l.buffers, l.res.BufferPods = b, b.PodCount() // both nil-safe
}

// scaleUpPods plans for the pending pods and buffer pods left and
// executes the plan's first step, unless a request's atomic scale-up was
// this loop's; pods being bound wait, and say so.
func (l *loop) scaleUpPods(ctx context.Context) {
	if (len(l.st.Unschedulable) > 0 || len(l.buffers.Unplaced()) > 0) && l.res.ScaleUp == nil {
		metrics.UpdateLastTime(metrics.FunctionScaleUp, l.cfg.Now())
		scaleUpStart := time.Now()
		l.fail(l.scaleUp(ctx))
		metrics.UpdateDurationFromStart(metrics.FunctionScaleUp, scaleUpStart)
	}
	l.res.NoScaleUp = append(l.res.NoScaleUp, waitingForBinding(l.st)...)
}

// scaleDownNodes finds unneeded nodes and removes those due. Scale-down
// goes on while a group fails to scale up, but not while the cluster is
// unhealthy nor after this loop's scale-up.
func (l *loop) scaleDownNodes(ctx context.Context) {
	metrics.UpdateScaleDownInCooldown(l.scaleDownInCooldown())
	if !l.st.Healthy || l.res.ScaleUp != nil || !l.cfg.ScaleDown.Enabled || l.cfg.Now().Sub(l.lastScaleUp) < l.cfg.ScaleDown.DelayAfterAdd {
		return
	}
	metrics.UpdateLastTime(metrics.FunctionScaleDown, l.cfg.Now())
	scaleDownStart := time.Now()
	l.fail(l.scaleDown(ctx))
	metrics.UpdateDurationFromStart(metrics.FunctionScaleDown, scaleDownStart)
}

// finish records what the loop did (dry-run calls, metrics, the status
// ConfigMap, a log line) and returns its result and error.
func (l *loop) finish(ctx context.Context) (*LoopResult, error) {
	res, err := l.res, l.err()
	if l.dryRun != nil {
		res.DryRun = true
		for _, c := range l.dryRun.Calls() {
			res.WouldCall = append(res.WouldCall, c.String())
		}
	}
	// The state's gauges wait for the loop's actions: counting a fleet's
	// devices is not worth delaying a scale-up for.
	l.recordStateMetrics(l.st)
	l.recordLoopMetrics(res)
	l.writeStatus(ctx, err)
	klog.FromContext(ctx).V(2).Info("Loop done", "unschedulable", res.Unschedulable, "upcoming", res.Upcoming,
		"scaleUp", res.ScaleUp != nil, "unneeded", len(res.Unneeded), "removed", res.Removed, "err", err)
	return res, err
}

// SharedSimulation is the loop's one simulation of its state: built once
// (a snapshot of tens of thousands of pods is not built twice), on first
// use. The requests' step books and decides in it, the buffers' step
// places its pods in it; scale-up and scale-down fork it and revert.
func (l *loop) SharedSimulation(ctx context.Context) (*placement.Engine, error) {
	if l.shared == nil {
		snap, err := l.st.Objects.Snapshot(l.podInfos)
		if err != nil {
			return nil, err
		}
		sim, err := placement.New(ctx, snap, l.cfg.Profile)
		if err != nil {
			return nil, err
		}
		l.shared = sim
	}
	return l.shared, nil
}
