package core

import (
	"context"
	"time"

	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/loopstep"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
)

// The loop is what its batch steps see of it; their logic is in their
// own rooms (autoscaler/provisioning, autoscaler/buffers).
var _ loopstep.Loop = (*loop)(nil)

func (l *loop) State() *clusterstate.State     { return l.st }
func (l *loop) Now() time.Time                 { return l.cfg.Now() }
func (l *loop) Recorder() record.EventRecorder { return l.cfg.Recorder }

func (l *loop) Planner(sim *placement.Engine, groups []*nodegroup.NodeGroup) *scaleup.Planner {
	return l.planner(sim, l.st, groups)
}

func (l *loop) ScaleUpAllOrNone(ctx context.Context, step []scaleup.ScaleUp) ([]loopstep.ScaledUp, error) {
	r := l.executeStep(ctx, l.st, step, nil, l.res, true)
	if r.superseded {
		return nil, loopstep.ErrSuperseded
	}
	out := make([]loopstep.ScaledUp, len(r.done))
	for i, g := range r.done {
		out[i] = loopstep.ScaledUp{NodeGroup: g.su.NodeGroup, From: g.from, NewNodes: g.su.NewNodes, Promised: g.promised}
	}
	return out, r.err
}

// serveRequests is the loop's ProvisioningRequest step (its room:
// autoscaler/provisioning): the requests are read with their timers
// applied, then served; the loop's simulations book their capacity from
// then on.
func (l *loop) serveRequests(ctx context.Context) {
	if l.cfg.ProvisioningRequests == nil {
		return
	}
	reqs, err := l.cfg.ProvisioningRequests.Start(ctx, l.st.Objects.RunningPods, l.cfg.Now())
	if err != nil {
		metrics.RegisterError(metrics.ErrorAPICall)
		l.fail(err)
		return
	}
	l.requests = reqs
	l.fail(reqs.Serve(ctx, l))
	l.res.ProvisioningRequests = reqs.Reports
}
