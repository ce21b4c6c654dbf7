package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/scaleup"
)

// scaledUp is a group a step asked for nodes.
type scaledUp struct {
	su       scaleup.ScaleUp
	from     int // the group's target size before
	maxSize  int
	promised bool // the provider promised all the nodes or none
}

// String is the group as CA's TriggeredScaleUp event lists it.
func (s scaledUp) String() string {
	return fmt.Sprintf("{%s %d->%d (max: %d)}", s.su.NodeGroup, s.from, s.from+s.su.NewNodes, s.maxSize)
}

// stepResult is what executing one step of a plan did.
type stepResult struct {
	done   []scaledUp
	helped []*v1.Pod // the pending pods the executed groups take
	// failed is the group whose increase failed, backed off until
	// backoffUntil; "" when none did.
	failed       string
	backoffUntil time.Time
	err          error
	// superseded: the loop gave up its scale-up (Config.Hold); nothing
	// was asked.
	superseded bool
}

// executeStep asks the groups of one step of a plan for their nodes, in
// order, and stops at the first that fails, as CA's executor does
// without --parallel-scale-up: that group is backed off (unless it is
// gone or its size unreadable), the groups before it stand and their
// nodes are upcoming next loop. Each executed group is recorded with the
// pods of pods it takes (nil: in-memory pods, none to name). allOrNone
// asks every group for all or none where the provider can promise it
// (ProvisioningRequests); otherwise a gang's scale-up only asks so. The
// loop's first step waits for the batch of events that started it to
// close (holdForBatch); a loop superseded by later events asks nothing.
func (l *loop) executeStep(ctx context.Context, st *clusterstate.State, step []scaleup.ScaleUp, pods podIndex,
	res *LoopResult, allOrNone bool) stepResult {
	var r stepResult
	if !l.holdForBatch(ctx) {
		r.superseded = true
		return r
	}
	a := l.Autoscaler
	var missing []error
	for _, su := range step {
		group := a.group(su.NodeGroup)
		if group == nil {
			r.err = fmt.Errorf("plan names node group %s, which is no longer one of the provider's", su.NodeGroup)
			break
		}
		from, err := group.TargetSize()
		if err != nil {
			metrics.RegisterError(metrics.ErrorCloudProvider)
			r.err = fmt.Errorf("node group %s: target size: %w", su.NodeGroup, err)
			break
		}
		promised, err := increase(ctx, group, su, allOrNone)
		if err != nil {
			// As CA: an event on the status ConfigMap (FailedToScaleUpGroup),
			// none on the pods.
			metrics.RegisterError(metrics.ErrorCloudProvider)
			r.failed, r.backoffUntil = su.NodeGroup, a.clusterState.RegisterFailedScaleUp(su.NodeGroup, err, a.cfg.Now())
			res.FailedScaleUps = append(res.FailedScaleUps, su.NodeGroup)
			r.err = fmt.Errorf("scale up node group %s by %d: %w", su.NodeGroup, su.NewNodes, err)
			break
		}
		var helped []*v1.Pod
		if pods != nil {
			helped = make([]*v1.Pod, 0, len(su.Pods))
			for _, ref := range su.Pods {
				pod, err := pods.get(ref)
				if err != nil {
					missing = append(missing, err)
					continue
				}
				helped = append(helped, pod)
			}
		}
		// CA logs each executed scale-up too; a person (and the live
		// benchmark) counts IncreaseSize calls by this line.
		klog.FromContext(ctx).Info("Scale-up: setting group size", "nodeGroup", su.NodeGroup, "from", from,
			"to", from+su.NewNodes, "max", group.MaxSize())
		a.recordScaleUp(su, from, group.MaxSize(), helped, st, res)
		r.done = append(r.done, scaledUp{su: su, from: from, maxSize: group.MaxSize(), promised: promised})
		r.helped = append(r.helped, helped...)
	}
	if len(r.done) > 0 && res.ScaleUp == nil {
		first := r.done[0].su
		res.ScaleUp = &first
	}
	r.err = errors.Join(append(missing, r.err)...)
	return r
}

// increase asks group for su's nodes: all or none where the provider can
// promise it (AtomicIncreaseSize) for a gang, or for every group when
// allOrNone, as CA asks for a best-effort-atomic ProvisioningRequest's.
// promised says the provider did promise it.
func increase(ctx context.Context, group cloudprovider.NodeGroup, su scaleup.ScaleUp, allOrNone bool) (promised bool, err error) {
	if su.Atomic || allOrNone {
		return cloudprovider.IncreaseAtomically(ctx, group, su.NewNodes)
	}
	return false, group.IncreaseSize(ctx, su.NewNodes)
}
