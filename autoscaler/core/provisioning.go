package core

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

	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/provreq"
)

// maxConsumerEvents bounds the events on consuming pods a loop, as CA's.
const maxConsumerEvents = 50

// serveRequests is the loop's ProvisioningRequest step: timers, then the
// requests to decide on a simulation that books the capacity of the
// provisioned ones; an atomic scale-up is executed here (and is then the
// loop's scale-up). Pods that consume a request never drive a regular
// scale-up: they are dropped from the loop's unschedulable pods.
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
	l.dropConsumers()
	todo := reqs.ToDecide()
	if len(todo) > 0 {
		if err := l.decideRequests(ctx, todo); err != nil {
			reqs.Errors = append(reqs.Errors, err)
		}
	}
	reqs.Log(ctx)
	metrics.UpdateProvisioningRequests(requestCounts(reqs.Served))
	l.fail(reqs.Err())
}

// dropConsumers takes pods that consume a ProvisioningRequest out of the
// regular scale-up, with an event on each (at most maxConsumerEvents).
func (l *loop) dropConsumers() {
	st := l.st
	kept := st.Unschedulable[:0:0]
	events := 0
	for _, pod := range st.Unschedulable {
		name := provreq.ConsumedRequest(pod)
		if name == "" {
			kept = append(kept, pod)
			continue
		}
		if events < maxConsumerEvents && l.cfg.Recorder != nil {
			events++
			l.cfg.Recorder.Eventf(pod, v1.EventTypeNormal, EventNotTriggerScaleUp,
				"Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest %s/%s", pod.Namespace, name)
		}
	}
	st.Unschedulable = kept
}

// bookRequests places the pods of provisioned requests (less what real
// pods consume) in h's snapshot. A request whose pods cannot be built
// fails (FailedToBookCapacity); any other booking error goes to failed.
func (l *loop) bookRequests(ctx context.Context, sim *placement.Engine, failed func(error)) {
	booked := l.requests.Booked()
	if len(booked) == 0 {
		return
	}
	engine := provreq.Decider{Planner: l.planner(sim, l.st, nil), Templates: l.cfg.ProvisioningRequests.Templates}
	for _, b := range engine.Book(ctx, booked, l.requests.Consumers) {
		if b.Err == nil {
			klog.FromContext(ctx).V(4).Info("Booked ProvisioningRequest capacity", "request", provreq.Key(b.Request),
				"booked", b.Booked, "unplaced", b.Unplaced, "consumed", b.Consumed)
			continue
		}
		if _, bad := errors.AsType[*provreq.InvalidError](b.Err); bad {
			l.requests.Record(ctx, provreq.Decision{Request: b.Request, Condition: provreq.Condition{Type: prv1.Failed,
				Status: metav1.ConditionTrue, Reason: provreq.ReasonFailedToBookCapacity, Message: "Couldn't create pods: " + b.Err.Error()}})
			continue
		}
		failed(fmt.Errorf("book ProvisioningRequest %s: %w", provreq.Key(b.Request), b.Err))
	}
}

// decideRequests decides todo in order, on one simulation: a request
// found or provisioned keeps its pods in it, so the next one in a batch
// cannot take the same room.
func (l *loop) decideRequests(ctx context.Context, todo []*prv1.ProvisioningRequest) error {
	reqs, st := l.requests, l.st
	// Inside the requests' step its errors are the requests' own.
	sim, err := l.simulation(ctx, func(err error) { reqs.Errors = append(reqs.Errors, err) })
	if err != nil {
		metrics.RegisterError(metrics.ErrorInternal)
		return err
	}
	engine := provreq.Decider{Planner: l.planner(sim, st, st.ScaleUpEligible()), Templates: l.cfg.ProvisioningRequests.Templates}
	start := time.Now()
	var errs []error
	for i, pr := range todo {
		if i > 0 && time.Since(start) > reqs.Timebox() {
			break // the rest wait for the next loop, as in CA
		}
		if pr = reqs.Accept(ctx, pr); pr == nil {
			continue
		}
		d, err := engine.Decide(ctx, pr)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			metrics.RegisterError(metrics.ErrorInternal)
			d = provreq.Decision{Request: pr, Condition: provreq.Condition{Type: prv1.Provisioned, Status: metav1.ConditionFalse,
				Reason: provreq.ReasonFailedToCheckCapacity, Message: "Failed to check pre-existing capacity in the cluster: " + err.Error()}}
			errs = append(errs, fmt.Errorf("ProvisioningRequest %s: %w", provreq.Key(pr), err))
		}
		var sus []provreq.ReportScaleUp
		if len(d.ScaleUps) > 0 {
			d, sus = l.scaleUpAtomically(ctx, d)
		}
		pr = reqs.Record(ctx, d)
		l.res.ProvisioningRequests = append(l.res.ProvisioningRequests, provreq.ReportOf(pr, sus))
		if len(d.ScaleUps) > 0 {
			break // one scale-up a loop
		}
	}
	return errors.Join(errs...)
}

// scaleUpAtomically asks the decision's groups for their nodes, all or
// nothing where the provider can promise it. A refusal backs the group
// off, and the request is retried (CapacityIsNotFound).
func (l *loop) scaleUpAtomically(ctx context.Context, d provreq.Decision) (provreq.Decision, []provreq.ReportScaleUp) {
	r := l.executeStep(ctx, l.st, d.ScaleUps, nil, l.res, true)
	done := make([]provreq.ReportScaleUp, len(r.done))
	texts := make([]string, len(r.done))
	for i, g := range r.done {
		done[i] = provreq.ReportScaleUp{NodeGroup: g.su.NodeGroup, NewNodes: g.su.NewNodes, Atomic: g.promised}
		texts[i] = fmt.Sprintf("%s %d->%d", g.su.NodeGroup, g.from, g.from+g.su.NewNodes)
	}
	if r.err != nil {
		err := r.err
		if len(r.done) > 0 {
			// The balanced groups before it stand: what they added is
			// upcoming for the next try.
			err = fmt.Errorf("%w (after %s)", err, strings.Join(texts, ", "))
		}
		return provreq.ScaleUpFailed(d, err), done
	}
	if l.cfg.Recorder != nil {
		l.cfg.Recorder.Eventf(requestRef(d.Request), v1.EventTypeNormal, EventTriggeredScaleUp,
			"ProvisioningRequest triggered scale-up: [%s]", strings.Join(texts, ", "))
	}
	return d, done
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
