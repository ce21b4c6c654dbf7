package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/loopstep"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/provreq"
)

// maxConsumerEvents bounds the events on consuming pods a loop, as CA's.
const maxConsumerEvents = 50

// Serve is the loop's ProvisioningRequest step, after Start: pods that
// consume a request leave the regular scale-up; the provisioned requests'
// capacity is booked in the loop's shared simulation, then the requests to
// decide are decided there (a request found or provisioned keeps its pods
// in it for every later step); an atomic scale-up is executed here (and is
// then the loop's scale-up). Every error of the step is in the one
// returned.
func (r *Loop) Serve(ctx context.Context, l loopstep.Loop) error {
	r.dropConsumers(l)
	if todo := r.ToDecide(); len(todo) > 0 || len(r.Booked()) > 0 {
		if sim, err := l.SharedSimulation(ctx); err != nil {
			metrics.RegisterError(metrics.ErrorInternal)
			r.Errors = append(r.Errors, err)
		} else {
			r.Book(ctx, l, sim)
			if err := r.decide(ctx, l, sim, todo); err != nil {
				r.Errors = append(r.Errors, err)
			}
		}
	}
	r.Log(ctx)
	metrics.UpdateProvisioningRequests(requestCounts(r.Served))
	return r.Err()
}

// dropConsumers takes pods that consume a ProvisioningRequest out of the
// loop's unschedulable pods (they never drive a regular scale-up, as with
// CA's filter), with an event on each (at most maxConsumerEvents).
func (r *Loop) dropConsumers(l loopstep.Loop) {
	st := l.State()
	kept := st.Unschedulable[:0:0]
	events := 0
	for _, pod := range st.Unschedulable {
		name := provreq.ConsumedRequest(pod)
		if name == "" {
			kept = append(kept, pod)
			continue
		}
		if rec := l.Recorder(); events < maxConsumerEvents && rec != nil {
			events++
			rec.Eventf(pod, v1.EventTypeNormal, loopstep.EventNotTriggerScaleUp,
				"Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest %s/%s", pod.Namespace, name)
		}
	}
	st.Unschedulable = kept
}

// Book places the pods of provisioned requests (less what real pods
// consume, and less those in sim already) in sim. A request whose pods
// cannot be built fails (FailedToBookCapacity); any other booking error
// is the step's.
func (r *Loop) Book(ctx context.Context, l loopstep.Loop, sim *placement.Engine) {
	booked := r.Booked()
	if len(booked) == 0 {
		return
	}
	decider := provreq.Decider{Planner: l.Planner(sim, nil), Templates: r.p.Templates}
	for _, b := range decider.Book(ctx, booked, r.Consumers) {
		if b.Err == nil {
			klog.FromContext(ctx).V(4).Info("Booked ProvisioningRequest capacity", "request", provreq.Key(b.Request),
				"booked", b.Booked, "unplaced", b.Unplaced, "consumed", b.Consumed)
			continue
		}
		if _, bad := errors.AsType[*provreq.InvalidError](b.Err); bad {
			r.Record(ctx, provreq.Decision{Request: b.Request, Condition: provreq.Condition{Type: prv1.Failed,
				Status: metav1.ConditionTrue, Reason: provreq.ReasonFailedToBookCapacity, Message: "Couldn't create pods: " + b.Err.Error()}})
			continue
		}
		r.Errors = append(r.Errors, fmt.Errorf("book ProvisioningRequest %s: %w", provreq.Key(b.Request), b.Err))
	}
}

// decide decides todo in order, in sim: a request found or provisioned
// keeps its pods there, so the next one in a batch cannot take the same
// room.
func (r *Loop) decide(ctx context.Context, l loopstep.Loop, sim *placement.Engine, todo []*prv1.ProvisioningRequest) error {
	if len(todo) == 0 {
		return nil
	}
	decider := provreq.Decider{Planner: l.Planner(sim, l.State().ScaleUpEligible()), Templates: r.p.Templates}
	snap := sim.Snapshot()
	start := time.Now()
	var errs []error
	for i, pr := range todo {
		if i > 0 && time.Since(start) > r.Timebox() {
			break // the rest wait for the next loop, as in CA
		}
		if pr = r.Accept(ctx, pr); pr == nil {
			continue
		}
		// What the decision keeps in sim (pods, an atomic request's new
		// nodes) goes again if the cloud refuses the nodes.
		snap.Fork()
		d, err := decider.Decide(ctx, pr)
		if err != nil {
			if ctx.Err() != nil {
				snap.Revert()
				return err
			}
			metrics.RegisterError(metrics.ErrorInternal)
			d = provreq.Decision{Request: pr, Condition: provreq.Condition{Type: prv1.Provisioned, Status: metav1.ConditionFalse,
				Reason: provreq.ReasonFailedToCheckCapacity, Message: "Failed to check pre-existing capacity in the cluster: " + err.Error()}}
			errs = append(errs, fmt.Errorf("ProvisioningRequest %s: %w", provreq.Key(pr), err))
		}
		var sus []provreq.ReportScaleUp
		refused := false
		if len(d.ScaleUps) > 0 {
			var superseded bool
			d, sus, superseded = r.scaleUpAllOrNone(ctx, l, d)
			if superseded {
				// The loop of the events that came since decides again.
				snap.Revert()
				break
			}
			refused = len(d.ScaleUps) == 0
		}
		if refused {
			snap.Revert()
		} else {
			snap.Commit()
		}
		pr = r.Record(ctx, d)
		r.Reports = append(r.Reports, provreq.ReportOf(pr, sus))
		if len(d.ScaleUps) > 0 {
			break // one scale-up a loop
		}
	}
	return errors.Join(errs...)
}

// scaleUpAllOrNone asks the decision's groups for their nodes, all or
// nothing where the provider can promise it. A refusal backs the group
// off, and the request is retried (CapacityIsNotFound). superseded: the
// loop asked for nothing (loopstep.ErrSuperseded).
func (r *Loop) scaleUpAllOrNone(ctx context.Context, l loopstep.Loop, d provreq.Decision) (_ provreq.Decision, _ []provreq.ReportScaleUp, superseded bool) {
	scaled, err := l.ScaleUpAllOrNone(ctx, d.ScaleUps)
	if errors.Is(err, loopstep.ErrSuperseded) {
		return d, nil, true
	}
	done := make([]provreq.ReportScaleUp, len(scaled))
	texts := make([]string, len(scaled))
	for i, g := range scaled {
		done[i] = provreq.ReportScaleUp{NodeGroup: g.NodeGroup, NewNodes: g.NewNodes, Atomic: g.Promised}
		texts[i] = fmt.Sprintf("%s %d->%d", g.NodeGroup, g.From, g.From+g.NewNodes)
	}
	if err != nil {
		if len(scaled) > 0 {
			// The balanced groups before it stand: what they added is
			// upcoming for the next try.
			err = fmt.Errorf("%w (after %s)", err, strings.Join(texts, ", "))
		}
		return provreq.ScaleUpFailed(d, err), done, false
	}
	if rec := l.Recorder(); rec != nil {
		rec.Eventf(requestRef(d.Request), v1.EventTypeNormal, loopstep.EventTriggeredScaleUp,
			"ProvisioningRequest triggered scale-up: [%s]", strings.Join(texts, ", "))
	}
	return d, done, false
}

// requestRef is the request with its kind set, so that the event
// recorder can name it without its type in the scheme.
func requestRef(pr *prv1.ProvisioningRequest) *prv1.ProvisioningRequest {
	out := pr.DeepCopy()
	out.APIVersion, out.Kind = prv1.SchemeGroupVersion.String(), "ProvisioningRequest"
	return out
}

// requestCounts counts requests by class and by the condition that
// describes them now.
func requestCounts(prs []*prv1.ProvisioningRequest) map[[2]string]int {
	out := map[[2]string]int{}
	for _, pr := range prs {
		out[[2]string{pr.Spec.ProvisioningClassName, provreq.State(pr)}]++
	}
	return out
}
