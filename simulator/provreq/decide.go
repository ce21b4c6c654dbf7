package provreq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
)

// Decider decides requests on one loop's placement engine. Its planner's
// placement engine's snapshot is changed: booked and found capacity stays in it, so
// that every later request, the regular pods and scale-down see it taken.
type Decider struct {
	// Planner plans for the atomic class: the loop's groups, expander and
	// limits over the loop's placement engine. Check-capacity and booking use it
	// with no groups.
	Planner   *scaleup.Planner
	Templates Templates
}

// Decision is what a request gets this loop.
type Decision struct {
	Request *prv1.ProvisioningRequest
	// Condition is the Provisioned or Failed condition to set.
	Condition Condition
	// ScaleUps is the atomic scale-up to execute (the chosen group and the
	// similar groups it is balanced with), all or nothing; empty when
	// none is needed or possible.
	ScaleUps []scaleup.ScaleUp
	// Existing are the request's pods that existing nodes take.
	Existing []scaleup.Placement
	// NoScaleUp says, per pod left without room, why.
	NoScaleUp []scaleup.NoScaleUp
	// Pods are the request's in-memory pods.
	Pods []*v1.Pod
	// Topology is the domain the request is placed in, for a request whose
	// PodTemplates ask for one (Kueue's TAS annotations); nil otherwise.
	Topology *scaleup.Topology
}

// Provisioned says whether the decision sets Provisioned=True.
func (d *Decision) Provisioned() bool {
	return d.Condition.Type == prv1.Provisioned && d.Condition.Status == metav1.ConditionTrue
}

func failed(pr *prv1.ProvisioningRequest, reason string, err error) Decision {
	return Decision{Request: pr, Condition: Condition{Type: prv1.Failed, Status: metav1.ConditionTrue, Reason: reason, Message: err.Error()}}
}

// Decide decides one served request: check-capacity or atomic.
func (e *Decider) Decide(ctx context.Context, pr *prv1.ProvisioningRequest) (Decision, error) {
	pods, err := Pods(pr, e.Templates)
	if err == nil {
		err = e.claimTemplatesExist(pr)
	}
	var topo topologyRequest
	if err == nil {
		topo, err = topologyOf(pr, pods)
	}
	if err != nil {
		if _, ok := errors.AsType[*InvalidError](err); ok {
			return failed(pr, ReasonFailedToCreatePods, err), nil
		}
		return Decision{}, err
	}
	if topo.key != "" {
		return e.decideInDomain(ctx, pr, pods, topo)
	}
	return e.decideClass(ctx, pr, pods)
}

// decideClass decides pr's pods by its class.
func (e *Decider) decideClass(ctx context.Context, pr *prv1.ProvisioningRequest, pods []*v1.Pod) (Decision, error) {
	switch {
	case IsCheckCapacity(pr):
		return e.checkCapacity(ctx, pr, pods)
	case pr.Spec.ProvisioningClassName == BestEffortAtomic:
		return e.atomic(ctx, pr, pods)
	}
	return Decision{}, fmt.Errorf("ProvisioningRequest %s: spec.provisioningClassName: %q is not a class draxr serves", Key(pr), pr.Spec.ProvisioningClassName)
}

// claimTemplatesExist: a podSet's pods whose claims name a
// ResourceClaimTemplate that does not exist can never be created.
func (e *Decider) claimTemplatesExist(pr *prv1.ProvisioningRequest) error {
	snap := e.Planner.Engine.Snapshot()
	for i, ps := range pr.Spec.PodSets {
		t := e.Templates(pr.Namespace, ps.PodTemplateRef.Name)
		for j, pc := range t.Template.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName != nil && snap.ResourceClaimTemplate(pr.Namespace, *pc.ResourceClaimTemplateName) == nil {
				return &InvalidError{Request: Key(pr), Field: fmt.Sprintf("spec.podSets[%d].podTemplateRef.name", i),
					Detail: fmt.Sprintf("PodTemplate %s/%s: template.spec.resourceClaims[%d].resourceClaimTemplateName: ResourceClaimTemplate %s/%s not found",
						pr.Namespace, ps.PodTemplateRef.Name, j, pr.Namespace, *pc.ResourceClaimTemplateName)}
			}
		}
	}
	return nil
}

// checkCapacity: do all the pods fit the nodes there are now? Yes: they
// stay placed (booked) and the request is Provisioned. No: nothing is
// kept, and the request is retried, or fails with noRetry. Never a
// scale-up.
func (e *Decider) checkCapacity(ctx context.Context, pr *prv1.ProvisioningRequest, pods []*v1.Pod) (Decision, error) {
	snap := e.Planner.Engine.Snapshot()
	snap.Fork()
	plan, err := e.existingOnly().PlanContext(ctx, pods)
	if err != nil {
		snap.Revert()
		return Decision{}, err
	}
	d := Decision{Request: pr, Pods: pods, Existing: plan.ExistingNodes, NoScaleUp: plan.NoScaleUp}
	if len(plan.NoScaleUp) == 0 {
		snap.Commit()
		d.Condition = Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsFound,
			Message: fmt.Sprintf("Capacity is found in the cluster: all %d pods fit the existing nodes", len(pods))}
		return d, nil
	}
	snap.Revert()
	d.Condition = notFound(pr, fmt.Sprintf("%d of %d pods do not fit the existing nodes; %s", len(plan.NoScaleUp), len(pods), firstReason(plan.NoScaleUp)))
	return d, nil
}

// atomic: what the existing nodes do not take is planned all or nothing
// on new nodes of one group (balanced with its similar groups).
func (e *Decider) atomic(ctx context.Context, pr *prv1.ProvisioningRequest, pods []*v1.Pod) (Decision, error) {
	snap := e.Planner.Engine.Snapshot()
	snap.Fork()
	p := *e.Planner
	p.AllOrNothing = true
	plan, err := p.PlanContext(ctx, pods)
	if err != nil {
		snap.Revert()
		return Decision{}, err
	}
	d := Decision{Request: pr, Pods: pods, Existing: plan.ExistingNodes, NoScaleUp: plan.NoScaleUp}
	switch {
	case len(plan.NoScaleUp) > 0:
		snap.Revert()
		d.Condition = notFound(pr, fmt.Sprintf("no scale-up for the %d pods that do not fit the existing nodes: %s",
			len(plan.NoScaleUp), firstReason(plan.NoScaleUp)))
	case len(plan.FirstLoop) == 0:
		snap.Commit()
		d.Condition = Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsFound,
			Message: fmt.Sprintf("Capacity is found in the cluster: all %d pods fit the existing nodes", len(pods))}
	default:
		// The new nodes stay in the snapshot until the caller knows
		// whether the cloud gave them (Revert otherwise).
		snap.Commit()
		d.ScaleUps = plan.FirstLoop
		var groups []string
		for _, su := range plan.FirstLoop {
			groups = append(groups, fmt.Sprintf("%s +%d", su.NodeGroup, su.NewNodes))
		}
		d.Condition = Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsProvisioned,
			Message: fmt.Sprintf("Capacity is provisioned: %d pods on new nodes (%s), %d on existing nodes",
				len(pods)-len(plan.ExistingNodes), strings.Join(groups, ", "), len(plan.ExistingNodes))}
	}
	return d, nil
}

// ScaleUpFailed is the decision after the cloud refused the atomic
// scale-up: retried with backoff, as CA does (or failed, with noRetry).
func ScaleUpFailed(d Decision, err error) Decision {
	d.ScaleUps = nil
	d.Condition = notFound(d.Request, fmt.Sprintf("the atomic scale-up failed: %v", err))
	return d
}

// notFound is a request's CapacityIsNotFound: retried with backoff, as CA
// does; with parameters.noRetry "true" (which CA reads for
// check-capacity only, draxr for both classes) it fails at once, so that
// Kueue releases the quota and retries or rejects the workload instead of
// waiting.
func notFound(pr *prv1.ProvisioningRequest, why string) Condition {
	if NoRetry(pr) {
		return Condition{Type: prv1.Failed, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsNotFound,
			Message: "draxr could not find requested capacity (noRetry): " + why}
	}
	return Condition{Type: prv1.Provisioned, Status: metav1.ConditionFalse, Reason: ReasonCapacityIsNotFound,
		Message: "Capacity is not found, draxr will try to find it later: " + why}
}

// existingOnly is the planner without groups: pods go on nodes there are,
// on the first that fits (CA's TrySchedulePods): "is there room?".
func (e *Decider) existingOnly() *scaleup.Planner {
	p := *e.Planner
	p.Groups = nil
	p.AllOrNothing = false
	p.FirstFit = true
	return &p
}

func firstReason(n []scaleup.NoScaleUp) string {
	if len(n) == 0 {
		return ""
	}
	return fmt.Sprintf("pod %s: %s", n[0].Pod, n[0].Reason)
}

// Booking is what one provisioned request holds this loop.
type Booking struct {
	Request *prv1.ProvisioningRequest
	// Booked are the in-memory pods placed; Unplaced found no room (the
	// booking is best effort, as CA's).
	Booked, Unplaced int
	// Consumed counts the request's real pods already scheduled.
	Consumed int
	Err      error
}

// Book places, for each request that holds capacity, the pods it stands
// for that are not yet consumed by real scheduled pods (consumers maps
// Key to those pods): a partly consumed request books only the rest, so
// no capacity is counted twice. Booked pods may be moved by scale-down
// (safe to evict) and never block a drain: they are not in the cluster.
func (e *Decider) Book(ctx context.Context, prs []*prv1.ProvisioningRequest, consumers map[string][]*v1.Pod) []Booking {
	out := make([]Booking, 0, len(prs))
	for _, pr := range prs {
		b := Booking{Request: pr, Consumed: len(consumers[Key(pr)])}
		pods, err := Pods(pr, e.Templates)
		if err != nil {
			b.Err = err
			out = append(out, b)
			continue
		}
		planner := e.existingOnly()
		// A request placed in one domain holds that domain's room.
		if t, ok := bookingDomain(pr, pods); ok {
			planner = planner.ForDomain(planner.Domains(t.Key), t.Value)
			pods = scaleup.InDomain(pods, t.Key, t.Value)
		}
		pods, held := notHeld(e.Planner.Engine.Snapshot(), unconsumed(pr, pods, consumers[Key(pr)], e.Templates))
		for _, p := range pods {
			p.Annotations[drainability.SafeToEvictAnnotation] = "true"
		}
		plan, err := planner.PlanContext(ctx, pods)
		if err != nil {
			b.Err = err
			out = append(out, b)
			continue
		}
		b.Booked, b.Unplaced = held+len(plan.ExistingNodes), len(plan.NoScaleUp)
		out = append(out, b)
	}
	return out
}

// notHeld drops the pods the simulation holds already (booked, or kept
// by the decision that provisioned the request: a pod's UID is the same
// in every loop), and counts them: a request is never booked twice.
func notHeld(snap *snapshot.Snapshot, pods []*v1.Pod) ([]*v1.Pod, int) {
	out := pods[:0:0]
	for _, p := range pods {
		if _, _, ok := snap.Pod(p.UID); !ok {
			out = append(out, p)
		}
	}
	return out, len(pods) - len(out)
}

// unconsumed drops, per podSet, as many in-memory pods as real pods of
// that podSet are scheduled.
func unconsumed(pr *prv1.ProvisioningRequest, pods, consumers []*v1.Pod, templates Templates) []*v1.Pod {
	if len(consumers) == 0 {
		return pods
	}
	left := make([]int, len(pr.Spec.PodSets))
	for i, ps := range pr.Spec.PodSets {
		left[i] = int(ps.Count)
	}
	for _, c := range consumers {
		if i := PodSetOf(c, pr, templates, left); i >= 0 {
			left[i]--
		}
	}
	out := pods[:0:0]
	next := 0
	for i, ps := range pr.Spec.PodSets {
		n := int(ps.Count)
		out = append(out, pods[next:next+max(left[i], 0)]...)
		next += n
	}
	return out
}
