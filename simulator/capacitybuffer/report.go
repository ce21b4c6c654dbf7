package capacitybuffer

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Report is one buffer as a plan leaves it: its replicas and condition,
// and where its pods' room is.
type Report struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Replicas  int32           `json:"replicas"`
	Condition ReportCondition `json:"condition"`
	// KeptOnExistingNodes counts its pods the nodes there are hold.
	KeptOnExistingNodes int `json:"keptOnExistingNodes"`
	// OnNewNodes counts, per node group, its pods new nodes take.
	OnNewNodes map[string]int `json:"onNewNodes,omitempty"`
	// NoRoom counts its pods nothing takes, and Reason says why (the
	// first such pod's).
	NoRoom int    `json:"noRoom,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ReportCondition is a condition without its times.
type ReportCondition struct {
	Type    string                 `json:"type"`
	Status  metav1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message,omitempty"`
}

// ReportOf is b's report before placement: its replicas and the
// condition that says most (not ready, else Provisioning).
func ReportOf(b *CapacityBuffer) Report {
	r := Report{Namespace: b.Namespace, Name: b.Name, Replicas: ptr.Deref(b.Status.Replicas, 0)}
	c := meta.FindStatusCondition(b.Status.Conditions, ReadyForProvisioning)
	if c == nil || c.Status == metav1.ConditionTrue {
		if p := meta.FindStatusCondition(b.Status.Conditions, Provisioning); p != nil {
			c = p
		}
	}
	if c != nil {
		r.Condition = ReportCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	return r
}
