// Package loopstep is the contract between the autoscaler's loop
// (autoscaler/core) and the steps of its batch features
// (autoscaler/provisioning, autoscaler/buffers): what a step may read and
// ask of the loop it runs in, as kube-scheduler's framework.Handle is for
// its plugins. A feature's room is its package: it reads its objects,
// decides on the loop's simulations and writes its results; the loop only
// calls its step in order.
package loopstep

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
)

// Event reasons the loop and its steps put on pods and batch objects,
// CA's.
const (
	EventTriggeredScaleUp  = "TriggeredScaleUp"
	EventNotTriggerScaleUp = "NotTriggerScaleUp"
)

// Loop is one loop as its steps see it.
type Loop interface {
	// State is the cluster state the loop decides on. A step may narrow
	// its Unschedulable pods (pods another step serves).
	State() *clusterstate.State
	// Now is the loop's clock.
	Now() time.Time
	// Recorder sends events; nil when there is none.
	Recorder() record.EventRecorder
	// SharedSimulation is the loop's one simulation of its state, built
	// on first use: the requests' step books and decides in it, the
	// buffers' step places its pods, scale-up and scale-down fork it. A
	// step that changes it keeps the change for every later step.
	SharedSimulation(ctx context.Context) (*placement.Engine, error)
	// Planner plans on sim for groups (nil: none, existing nodes only)
	// with the loop's expander, limits and pod rules.
	Planner(sim *placement.Engine, groups []*nodegroup.NodeGroup) *scaleup.Planner
	// ScaleUpAllOrNone asks the groups of one plan step for their nodes,
	// each all or none where the provider can promise it; it stops at the
	// first group that fails (backed off), the groups before it stand.
	// ErrSuperseded: the loop asked for nothing and the step records
	// nothing of its decision.
	ScaleUpAllOrNone(ctx context.Context, step []scaleup.ScaleUp) ([]ScaledUp, error)
}

// ErrSuperseded says the loop gave up its scale-up: events after it
// started will have a loop of their own, which decides again.
var ErrSuperseded = errors.New("loop superseded by later events")

// ScaledUp is a group the loop asked for nodes.
type ScaledUp struct {
	NodeGroup string
	// From is the group's target size before.
	From     int
	NewNodes int
	// Promised: the provider promised all the nodes or none.
	Promised bool
}
