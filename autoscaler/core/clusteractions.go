package core

import (
	"context"
	"fmt"
	"time"

	"draxr.dev/draxr/autoscaler/clusterstate"
)

// ApplyClusterActions carries out what the cluster state recommends about
// nodes that did not come up: the one place the loop writes to the cloud
// for them. Each action's outcome is set on it (Applied, Err), and its
// success or failure event recorded, so that Registry.State counts what
// happened; one failed action never stops the next.
func ApplyClusterActions(ctx context.Context, reg *clusterstate.Registry, actions []clusterstate.Action, now time.Time) {
	for i := range actions {
		a := &actions[i]
		switch a.Kind {
		case clusterstate.Emit:
			reg.Event(a.Event.Type, a.Event.Reason, "%s", a.Event.Message)
		case clusterstate.BackOff:
			reg.BackOff(a.Group.Id(), a.Reason, now)
		case clusterstate.DeleteFailedInstances, clusterstate.DeleteNotStarted, clusterstate.DeleteLongUnregistered:
			a.Err = a.Group.DeleteNodes(ctx, a.Nodes)
		case clusterstate.RevertScaleUp:
			a.Err = a.Group.DecreaseTargetSize(ctx, a.Delta)
		default:
			a.Err = fmt.Errorf("unknown cluster-state action %q", a.Kind)
		}
		a.Applied = true
		if e := a.OnSuccess; e != nil && a.Err == nil {
			reg.Event(e.Type, e.Reason, "%s", e.Message)
		}
		if e := a.OnFailure; e != nil && a.Err != nil {
			reg.Event(e.Type, e.Reason, "%s: %v", e.Message, a.Err)
		}
	}
}
