package scaleup

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodRef names a pod of the plan. The live loop finds the pod by UID; a
// report prints it as namespace/name.
type PodRef struct {
	Namespace string
	Name      string
	UID       types.UID
}

// RefOf returns the pod's reference.
func RefOf(pod *v1.Pod) PodRef {
	return PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// MarshalJSON writes "namespace/name": reports and scripts read that.
func (r PodRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON reads "namespace/name" (the UID is not printed).
func (r *PodRef) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("pod reference %q: want namespace/name", s)
	}
	*r = PodRef{Namespace: ns, Name: name}
	return nil
}

// ReasonCode says, stably, why a pod does not get a scale-up; scripts and
// the live loop's events key on it, people read the message.
type ReasonCode string

const (
	// NoNodeGroups: nothing is configured that could grow.
	NoNodeGroups ReasonCode = "NoNodeGroups"
	// NeverSchedulable: no node of any shape could take the pod (for
	// example more than 32 DRA-backed devices in one pod).
	NeverSchedulable ReasonCode = "NeverSchedulable"
	// InsufficientResource: an empty new node offers less than the pod asks.
	InsufficientResource ReasonCode = "InsufficientResource"
	// PredicatesFailed: the scheduler's filters reject a new node.
	PredicatesFailed ReasonCode = "PredicatesFailed"
	// SharedPoolExhausted: a shared (network-attached) pool the pod needs
	// has no free device; new nodes do not add to it.
	SharedPoolExhausted ReasonCode = "SharedPoolExhausted"
	// MaxNodesTotalReached: --max-nodes-total is reached.
	MaxNodesTotalReached ReasonCode = "MaxNodesTotalReached"
	// MaxSizeReached: the group is at its max size.
	MaxSizeReached ReasonCode = "MaxSizeReached"
	// ResourceLimitReached: one more node of the group would go over a
	// cluster-wide maximum (--cores-total, --memory-total, --gpu-total);
	// the message has CA's wording, "max cluster cpu limit reached".
	ResourceLimitReached ReasonCode = "ResourceLimitReached"
	// MaxNodesPerScaleUpReached: an all-or-nothing scale-up needs more
	// nodes than --max-nodes-per-scaleup allows in one step.
	MaxNodesPerScaleUpReached ReasonCode = "MaxNodesPerScaleUpReached"
	// IdleDevicesAvoided: a device node is not opened for a pod that uses
	// no devices.
	IdleDevicesAvoided ReasonCode = "IdleDevicesAvoided"
	// NotChosen: a new node would fit, but the expander chose other groups
	// until none could help.
	NotChosen ReasonCode = "NotChosen"
	// SchedulingGated: the pod has scheduling gates; the scheduler does not
	// try it until they are removed, so no node would help yet.
	SchedulingGated ReasonCode = "SchedulingGated"
	// BeingDeleted: the pod is being deleted (metadata.deletionTimestamp);
	// the scheduler skips it and no node would help.
	BeingDeleted ReasonCode = "BeingDeleted"
	// NotServedByScheduler: no profile of the scheduler configuration is
	// the pod's spec.schedulerName, so the scheduler never places it.
	NotServedByScheduler ReasonCode = "NotServedByScheduler"
	// Expendable: the pod's priority is below
	// --expendable-pods-priority-cutoff; as in CA, it never triggers a
	// scale-up.
	Expendable ReasonCode = "Expendable"
	// GangDoesNotFit: the pod's gang (a PodGroup with a gang policy)
	// binds all its pods or none, and no scale-up takes all of them.
	GangDoesNotFit ReasonCode = "GangDoesNotFit"
	// TopologyDomainNotFound: the pod's gang (or request) must run in one
	// domain of a topology key, and no domain can hold all of it: each
	// domain's bound is in the reason.
	TopologyDomainNotFound ReasonCode = "TopologyDomainNotFound"
	// GangIncomplete: fewer of the gang's pods exist (or are pending long
	// enough) than its minCount; the scheduler waits for the rest.
	GangIncomplete ReasonCode = "GangIncomplete"
	// PodGroupNotFound: the pod names a PodGroup that does not exist; the
	// scheduler does not try it until it does.
	PodGroupNotFound ReasonCode = "PodGroupNotFound"
	// TopologyInvalid: the pod's PodGroup has more than one topology
	// entry or a key that is not a label key; the scheduler generates no
	// placement for it.
	TopologyInvalid ReasonCode = "TopologyInvalid"
	// WaitingForBindingConditions: the scheduler is binding the pod and
	// waits for its devices' binding conditions (KEP-5007); it is pending
	// again if they fail or time out.
	WaitingForBindingConditions ReasonCode = "WaitingForBindingConditions"
	// MultipleReasons: node groups decline for different reasons; see
	// NoScaleUp.NodeGroups.
	MultipleReasons ReasonCode = "MultipleReasons"
)

// GroupReason is why one node group does not take a pod.
type GroupReason struct {
	NodeGroup string     `json:"nodeGroup"`
	Code      ReasonCode `json:"code"`
	Message   string     `json:"message"`
}

// reasonOf sums up per-group reasons into one code and one message.
func reasonOf(groups []GroupReason) (ReasonCode, string) {
	if len(groups) == 0 {
		return NoNodeGroups, "no node group is configured, and no existing node has room"
	}
	code := groups[0].Code
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.Message
		if g.Code != code {
			code = MultipleReasons
		}
	}
	return code, strings.Join(parts, "; ")
}

// WaitingForBinding says of each of pods that reason says waits for its
// devices' binding conditions that it gets no scale-up, and why.
func WaitingForBinding(pods []*v1.Pod, reason func(*v1.Pod) (string, bool)) []NoScaleUp {
	var out []NoScaleUp
	for _, p := range pods {
		if why, ok := reason(p); ok {
			out = append(out, NoScaleUp{Pod: RefOf(p), Code: WaitingForBindingConditions, Reason: why})
		}
	}
	return out
}
