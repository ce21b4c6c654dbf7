// Package offline runs the scale-up planner on cluster state read from
// files: it builds the snapshot from loaded objects, plans, and gathers
// what the CLI reports. It is the offline front end of the same code path
// the live autoscaler runs.
package offline

import (
	"cmp"
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/limits"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// Options are the planner's knobs, as the CLI flags set them.
type Options struct {
	Profile       *config.KubeSchedulerProfile // nil: kube-scheduler's default
	Expander      expander.Strategy            // nil: least-waste
	MaxNodesTotal int
	// Limits are --cores-total, --memory-total, --gpu-total,
	// --max-nodes-per-scaleup and balancing; the zero value limits nothing.
	Limits limits.Options
	// Pods are CA's flags on which pending pods are planned for; nil
	// plans for all.
	Pods *scaleup.Flags
	// Requests is the loop's ProvisioningRequest step; nil leaves the
	// requests undecided (with a warning). Now is the time CA's timers are
	// read at (time.Now when zero).
	Requests RequestStep
	Now      time.Time
}

// RequestStep decides the ProvisioningRequests of objs at now, before the
// pending pods are planned, on the plan's simulation sim: what they book
// or are found or provisioned stays in it, so the pending pods see it.
// planning is the plan's planner configuration. draxr simulate passes the
// loop's own step (autoscaler/provisioning), which simulator/ cannot
// import: one request lifecycle for the loop and the CLI. It returns what
// the loop writes on each request it serves.
type RequestStep func(ctx context.Context, objs *input.Objects, sim *placement.Engine, planning scaleup.Config, now time.Time) ([]provreq.Report, error)

// decideRequests runs the request step, or warns that no step decides
// the requests.
func decideRequests(ctx context.Context, objs *input.Objects, sim *placement.Engine, planning scaleup.Config, opts Options) ([]provreq.Report, []string, error) {
	if len(objs.ProvisioningRequests) == 0 {
		return nil, nil, nil
	}
	if opts.Requests == nil {
		return nil, []string{fmt.Sprintf("%d ProvisioningRequests are not decided: this plan runs without the loop's request step", len(objs.ProvisioningRequests))}, nil
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	reports, err := opts.Requests(ctx, objs, sim, planning, now)
	if err != nil {
		return nil, nil, fmt.Errorf("provisioning requests: %w", err)
	}
	return reports, nil, nil
}

// ConsumesProvisioningRequest: the pod consumes a ProvisioningRequest,
// whose capacity it waits for; it drives no scale-up of its own.
const ConsumesProvisioningRequest scaleup.ReasonCode = "ConsumesProvisioningRequest"

// withoutConsumers takes the pods that consume a ProvisioningRequest out
// of the plan, as the loop does whenever it serves requests (CA's
// filter), whether or not the request is there; each gets a reason.
func withoutConsumers(pods []*v1.Pod) ([]*v1.Pod, []scaleup.NoScaleUp) {
	out := make([]*v1.Pod, 0, len(pods))
	var dropped []scaleup.NoScaleUp
	for _, pod := range pods {
		name := provreq.ConsumedRequest(pod)
		if name == "" {
			out = append(out, pod)
			continue
		}
		dropped = append(dropped, scaleup.NoScaleUp{Pod: scaleup.RefOf(pod), Code: ConsumesProvisioningRequest,
			Reason: fmt.Sprintf("consuming ProvisioningRequest %s/%s: it waits for the request's capacity, not a scale-up of its own", pod.Namespace, name)})
	}
	return out, dropped
}

// nodeAllocatableWarning says once per plan that devices carrying
// nodeAllocatableResources (KEP-5517) take node CPU or memory the plan
// does not count; "" when none do.
func nodeAllocatableWarning(objs *input.Objects) []string {
	n := 0
	for _, s := range objs.ResourceSlices {
		if len(devicepools.NodeAllocatableDevices(&s.Spec)) > 0 {
			n++
		}
	}
	for _, g := range objs.NodeGroups {
		for i := range g.Spec.ResourceSlices {
			if len(devicepools.NodeAllocatableDevices(&g.Spec.ResourceSlices[i])) > 0 {
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d ResourceSlices carry nodeAllocatableResources (KEP-5517): the node CPU and memory their devices' allocations take "+
		"are not counted (DRANodeAllocatableResources is off in draxr); draxr doctor names them", n)}
}

// serveBuffers is what draxr-autoscaler with both buffer flags does to
// each buffer (active-capacity ones): its status, and its pods, created
// now, after every pending pod.
func serveBuffers(objs *input.Objects, opts Options) ([]*v1.Pod, []*capacitybuffer.CapacityBuffer) {
	if len(objs.CapacityBuffers) == 0 {
		return nil, nil
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	templates := map[[2]string]*v1.PodTemplate{}
	for _, t := range objs.PodTemplates {
		templates[[2]string{t.Namespace, t.Name}] = t
	}
	devices := capacitybuffer.NewDevices(objs.DeviceClasses, objs.ResourceClaimTemplates)
	src := capacitybuffer.Sources{
		Templates: func(ns, name string) *v1.PodTemplate { return templates[[2]string{ns, name}] },
		Workloads: func(ns string, ref capacitybuffer.ScalableRef) (*v1.PodTemplateSpec, int32, bool) {
			return objs.Workload(ref.Kind, ns, ref.Name)
		},
	}
	var buffers []*capacitybuffer.CapacityBuffer
	for _, b := range objs.CapacityBuffers {
		if b.Strategy() == capacitybuffer.ActiveCapacity {
			buffers = append(buffers, b.DeepCopy())
		}
	}
	pods := capacitybuffer.ServeAll(buffers, src, devices, objs.ResourceQuotas, capacitybuffer.Options{Controller: true, Injection: true}, now)
	return pods, buffers
}

// placeBuffers reports where each buffer's pods went, and takes them out
// of the plan's pod lists.
func placeBuffers(plan *scaleup.Plan, buffers []*capacitybuffer.CapacityBuffer, pods []*v1.Pod) []capacitybuffer.Report {
	if len(buffers) == 0 {
		return nil
	}
	reports := make([]capacitybuffer.Report, len(buffers))
	index := map[string]int{}
	for i, b := range buffers {
		reports[i] = capacitybuffer.ReportOf(b)
		index[b.Key()] = i
	}
	byPod := map[types.UID]int{}
	for _, p := range pods {
		byPod[p.UID] = index[p.Namespace+"/"+capacitybuffer.BufferOf(p)]
	}
	of := func(ref scaleup.PodRef) (*capacitybuffer.Report, bool) {
		i, ok := byPod[ref.UID]
		if !ok {
			return nil, false
		}
		return &reports[i], true
	}
	existing := plan.ExistingNodes[:0]
	for _, pl := range plan.ExistingNodes {
		if r, ok := of(pl.Pod); ok {
			r.KeptOnExistingNodes++
			continue
		}
		existing = append(existing, pl)
	}
	plan.ExistingNodes = existing
	for i := range plan.ScaleUps {
		su := &plan.ScaleUps[i]
		pods, placements := su.Pods[:0:0], su.Placements[:0:0]
		for j, ref := range su.Pods {
			if r, ok := of(ref); ok {
				if r.OnNewNodes == nil {
					r.OnNewNodes = map[string]int{}
				}
				r.OnNewNodes[su.NodeGroup]++
				continue
			}
			pods = append(pods, ref)
			if j < len(su.Placements) {
				placements = append(placements, su.Placements[j])
			}
		}
		su.Pods, su.Placements = pods, placements
	}
	noScaleUp := plan.NoScaleUp[:0]
	for _, n := range plan.NoScaleUp {
		if r, ok := of(n.Pod); ok {
			if r.NoRoom == 0 {
				r.Reason = n.Reason
			}
			r.NoRoom++
			continue
		}
		noScaleUp = append(noScaleUp, n)
	}
	plan.NoScaleUp = noScaleUp
	return reports
}

// Result is a plan with the state it was made on.
type Result struct {
	Plan     *scaleup.Plan
	Snapshot *snapshot.Snapshot // after the plan: new nodes and placements included
	Engine   *placement.Engine
	// ClassErrors lists DeviceClasses whose selectors do not compile.
	ClassErrors []string
	// ProvisioningRequests are what draxr-autoscaler sets on each request
	// it serves; the plan's pods are planned after their bookings.
	ProvisioningRequests []provreq.Report
	// Warnings are what the plan leaves out and a person should know.
	Warnings []string
	// CapacityBuffers say where each buffer's room is; their pods are
	// not in the plan's pod lists (CA leaves fake pods out of its status
	// too), the nodes they need are in its scale-ups.
	CapacityBuffers []capacitybuffer.Report
}

// Simulate plans scale-ups for the pending pods in objs; it stops with
// ctx's error once ctx ends.
func Simulate(ctx context.Context, objs *input.Objects, opts Options) (*Result, error) {
	snap, err := objs.Snapshot(nil)
	if err != nil {
		return nil, err
	}
	eng, err := placement.New(ctx, snap, opts.Profile)
	if err != nil {
		return nil, err
	}
	exp := opts.Expander
	if exp == nil {
		if exp, err = expander.New("least-waste", nil, 0); err != nil {
			return nil, err
		}
	}
	var bypassed []string
	if opts.Pods != nil {
		bypassed = opts.Pods.BypassedSchedulerNames
	}
	planning := scaleup.Config{Groups: objs.NodeGroups, Expander: exp, MaxNodesTotal: opts.MaxNodesTotal,
		DaemonSets: objs.DaemonSets, Limits: opts.Limits, Pods: opts.Pods, Gangs: objs.Gangs(bypassed, nil)}
	// As the loop: requests first (timers, bookings, decisions, an
	// atomic request's new nodes), then the other pending pods.
	requests, warnings, err := decideRequests(ctx, objs, eng, planning, opts)
	if err != nil {
		return nil, err
	}
	p := scaleup.NewPlanner(eng, planning)
	matcher := p.Matcher
	// Pods that consume a request drive no scale-up, request or none.
	pending, consumers := withoutConsumers(objs.PendingPods)
	bufferPods, buffers := serveBuffers(objs, opts)
	pending = append(pending, bufferPods...)
	plan, err := p.PlanContext(ctx, pending)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	plan.NoScaleUp = append(plan.NoScaleUp, consumers...)
	plan.NoScaleUp = append(plan.NoScaleUp, waitingForBinding(objs, opts.Profile)...)
	res := &Result{Plan: plan, Snapshot: snap, Engine: eng, ProvisioningRequests: requests, Warnings: append(warnings, nodeAllocatableWarning(objs)...),
		CapacityBuffers: placeBuffers(plan, buffers, bufferPods)}
	classes, _ := snap.Classes().List()
	for _, c := range classes {
		if err := matcher.ClassError(c); err != nil {
			res.ClassErrors = append(res.ClassErrors, err.Error())
		}
	}
	return res, nil
}

// waitingForBinding says of each pod being bound whose claims wait for
// device binding conditions (KEP-5007) that it gets no scale-up, and why,
// as the autoscaler's loop does.
func waitingForBinding(objs *input.Objects, profile *config.KubeSchedulerProfile) []scaleup.NoScaleUp {
	wait := input.BindingWait{Now: time.Now(), Timeout: cmp.Or(placement.BindingTimeout(profile), input.DefaultBindingTimeout)}
	waiting := input.WaitingOnBindingConditions(objs.ResourceClaims, wait)
	if len(waiting) == 0 {
		return nil
	}
	return scaleup.WaitingForBinding(objs.RunningPods, func(p *v1.Pod) (string, bool) {
		w, ok := waiting[p.UID]
		if !ok {
			return "", false
		}
		return w.Reason(), true
	})
}
