package input

import (
	"fmt"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
)

// DefaultBindingTimeout is the scheduler's DynamicResources
// bindingTimeout when its configuration sets none.
const DefaultBindingTimeout = 600 * time.Second

// BindingWait is when a claim's device binding conditions (KEP-5007) are
// read: the scheduler's PreBind waits for them for at most Timeout after
// the allocation, then gives the pod up and deallocates.
type BindingWait struct {
	Now     time.Time
	Timeout time.Duration
}

// DefaultBindingWait is now, with the default timeout.
func DefaultBindingWait() BindingWait {
	return BindingWait{Now: time.Now(), Timeout: DefaultBindingTimeout}
}

// BindingState is where a claim stands with its devices' binding
// conditions.
type BindingState int

const (
	// BindingReady: no device has binding conditions, or all are met.
	BindingReady BindingState = iota
	// BindingWaiting: the scheduler waits in PreBind for a condition.
	BindingWaiting
	// BindingFailed: a failure condition is true or the wait timed out;
	// the scheduler deallocates the claim and tries the pod again.
	BindingFailed
)

// ClaimBinding is the claim's binding state, as the scheduler's
// DynamicResources plugin reads it, and until when it may wait.
func ClaimBinding(c *resourceapi.ResourceClaim, w BindingWait) (BindingState, time.Time) {
	a := c.Status.Allocation
	if a == nil || !slices.ContainsFunc(a.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool {
		return len(r.BindingConditions) > 0
	}) || !utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceBindingConditions) {
		return BindingReady, time.Time{}
	}
	waiting := false
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if len(r.BindingConditions) == 0 {
			continue
		}
		status := deviceStatus(c, r)
		if status != nil {
			for _, cond := range r.BindingFailureConditions {
				if apimeta.IsStatusConditionTrue(status.Conditions, cond) {
					return BindingFailed, time.Time{}
				}
			}
		}
		for _, cond := range r.BindingConditions {
			if status == nil || !apimeta.IsStatusConditionTrue(status.Conditions, cond) {
				waiting = true
			}
		}
	}
	if !waiting {
		return BindingReady, time.Time{}
	}
	var deadline time.Time
	if a.AllocationTimestamp != nil {
		deadline = a.AllocationTimestamp.Add(w.Timeout)
		if deadline.Before(w.Now) {
			return BindingFailed, deadline
		}
	}
	return BindingWaiting, deadline
}

func deviceStatus(c *resourceapi.ResourceClaim, r *resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocatedDeviceStatus {
	for i := range c.Status.Devices {
		d := &c.Status.Devices[i]
		// Matched by device, as the scheduler does.
		if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device {
			return d
		}
	}
	return nil
}

// BindingWaiter is a pod the scheduler is binding that waits for device
// binding conditions, where and until when.
type BindingWaiter struct {
	Node     string
	Claim    string
	Deadline time.Time
}

// Reason says what the pod waits for, for people.
func (w BindingWaiter) Reason() string {
	until := ""
	if !w.Deadline.IsZero() {
		until = fmt.Sprintf(" (the scheduler gives up at %s)", w.Deadline.UTC().Format(time.RFC3339))
	}
	node := w.Node
	if node == "" {
		node = "a node not known yet"
	}
	return fmt.Sprintf("waiting for device binding conditions on %s: ResourceClaim %s%s", node, w.Claim, until)
}

// WaitingOnBindingConditions lists, by pod UID, the pods whose claims
// wait for device binding conditions.
func WaitingOnBindingConditions(claims []*resourceapi.ResourceClaim, w BindingWait) map[types.UID]BindingWaiter {
	if !utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceBindingConditions) {
		return nil
	}
	var out map[types.UID]BindingWaiter
	for _, c := range claims {
		state, deadline := ClaimBinding(c, w)
		if state != BindingWaiting {
			continue
		}
		if out == nil {
			out = map[types.UID]BindingWaiter{}
		}
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && r.APIGroup == "" {
				out[r.UID] = BindingWaiter{Node: allocatedNode(c.Status.Allocation), Claim: c.Namespace + "/" + c.Name, Deadline: deadline}
			}
		}
		if c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
			if ref := metav1.GetControllerOfNoCopy(c); ref != nil && ref.Kind == "Pod" {
				out[ref.UID] = BindingWaiter{Node: allocatedNode(c.Status.Allocation), Claim: c.Namespace + "/" + c.Name, Deadline: deadline}
			}
		}
	}
	return out
}

// DropFailedBindings returns claims as the scheduler's Unreserve leaves
// them once a claim's binding failed or timed out: an extended-resource
// claim it made for the pod is gone, another claim is deallocated (a
// copy); the others are as they are. Its pod is then pending again.
func DropFailedBindings(claims []*resourceapi.ResourceClaim, w BindingWait) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for i, c := range claims {
		if state, _ := ClaimBinding(c, w); state != BindingFailed {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]*resourceapi.ResourceClaim, 0, len(claims)), claims[:i]...)
		}
		if c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
			continue
		}
		c = c.DeepCopy()
		c.Status.Allocation, c.Status.ReservedFor, c.Status.Devices = nil, nil, nil
		out = append(out, c)
	}
	if out == nil {
		return claims
	}
	return out
}
