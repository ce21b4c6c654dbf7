package clusterstate

import (
	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/autoscaler/backoff"
	"draxr.dev/draxr/cloudprovider"
)

// ActionKind is what the registry asks the loop to do about a group whose
// nodes did not come up. The registry only reads; autoscaler/core is the
// one place that writes to the cloud, and applies these.
type ActionKind string

const (
	// DeleteFailedInstances deletes instances the provider reports in
	// error (Group.DeleteNodes).
	DeleteFailedInstances ActionKind = "DeleteFailedInstances"
	// DeleteNotStarted deletes registered nodes that did not turn Ready
	// within --max-node-startup-time, or by the end of a timed-out
	// scale-up (Group.DeleteNodes).
	DeleteNotStarted ActionKind = "DeleteNotStarted"
	// RevertScaleUp gives back the target size of a timed-out scale-up's
	// unregistered nodes (Group.DecreaseTargetSize with a negative Delta).
	RevertScaleUp ActionKind = "RevertScaleUp"
	// DeleteLongUnregistered deletes instances without a Node for longer
	// than --max-node-provision-time (Group.DeleteNodes).
	DeleteLongUnregistered ActionKind = "DeleteLongUnregistered"
	// BackOff keeps the group out of scale-up (Registry.BackOff).
	BackOff ActionKind = "BackOff"
	// Emit records Event on the status ConfigMap.
	Emit ActionKind = "Emit"
)

// Event is a cluster-level event, CA's reason and message.
type Event struct {
	Type, Reason, Message string
}

// Action is one thing the registry recommends. The loop applies it and
// sets Applied and Err; Registry.State then counts only what happened.
type Action struct {
	Kind  ActionKind
	Group cloudprovider.NodeGroup
	// Nodes to delete: registered nodes, or unregistered instances stood
	// in for by Nodes named by their provider ID.
	Nodes []*v1.Node
	// Delta is RevertScaleUp's, negative: only unregistered capacity is
	// given back.
	Delta int
	// Reason is BackOff's.
	Reason backoff.Reason
	// Event is Emit's.
	Event Event
	// OnSuccess is recorded when the cloud call succeeds; OnFailure when
	// it fails, its message followed by ": " and the error.
	OnSuccess, OnFailure *Event
	// What names the call in an error: "delete 2 failed instances".
	What string

	Applied bool
	Err     error

	// givesUp are the node names and provider IDs the snapshot leaves
	// out once the action succeeded; reported is what State.GivenUp
	// lists for it.
	givesUp  []string
	reported []string
}

// IsCloudCall says whether applying the action writes to the provider.
func (a *Action) IsCloudCall() bool {
	switch a.Kind {
	case DeleteFailedInstances, DeleteNotStarted, DeleteLongUnregistered, RevertScaleUp:
		return true
	}
	return false
}

func emit(typ, reason, msg string) Action {
	return Action{Kind: Emit, Event: Event{Type: typ, Reason: reason, Message: msg}}
}
