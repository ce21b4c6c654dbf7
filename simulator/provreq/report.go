package provreq

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

// Report is one request as draxr-autoscaler leaves it: the condition
// that says where it is, and the atomic scale-up asked for it. draxr
// simulate prints it; the loop's status ConfigMap lists it.
type Report struct {
	Namespace             string          `json:"namespace"`
	Name                  string          `json:"name"`
	ProvisioningClassName string          `json:"provisioningClassName"`
	Condition             ReportCondition `json:"condition"`
	ScaleUp               []ReportScaleUp `json:"scaleUp,omitempty"`
	// ProvisioningClassDetails are the request's status details, the
	// topology domain it is placed in among them.
	ProvisioningClassDetails map[string]string `json:"provisioningClassDetails,omitempty"`
}

// ReportCondition is a condition without its times.
type ReportCondition struct {
	Type    string                 `json:"type"`
	Status  metav1.ConditionStatus `json:"status"`
	Reason  string                 `json:"reason"`
	Message string                 `json:"message"`
}

// ReportScaleUp is one group's share of an atomic scale-up.
type ReportScaleUp struct {
	NodeGroup string `json:"nodeGroup"`
	NewNodes  int    `json:"newNodes"`
	// Atomic: the provider promised all or nothing (the loop only; false
	// when it fell back to IncreaseSize).
	Atomic bool `json:"atomic,omitempty"`
}

// ReportOf is pr's report: its most telling condition (Failed, then
// BookingExpired, Provisioned, Accepted) and scale-ups.
func ReportOf(pr *prv1.ProvisioningRequest, scaleUps []ReportScaleUp) Report {
	r := Report{Namespace: pr.Namespace, Name: pr.Name, ProvisioningClassName: pr.Spec.ProvisioningClassName, ScaleUp: scaleUps}
	for k, v := range pr.Status.ProvisioningClassDetails {
		if r.ProvisioningClassDetails == nil {
			r.ProvisioningClassDetails = map[string]string{}
		}
		r.ProvisioningClassDetails[k] = string(v)
	}
	for _, t := range []string{prv1.Failed, prv1.BookingExpired, prv1.Provisioned, prv1.Accepted} {
		c := meta.FindStatusCondition(pr.Status.Conditions, t)
		if c == nil || (t != prv1.Provisioned && c.Status != metav1.ConditionTrue) {
			continue
		}
		r.Condition = ReportCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
		return r
	}
	r.Condition = ReportCondition{Type: prv1.Accepted, Status: metav1.ConditionFalse, Reason: "Pending", Message: "not taken up yet"}
	return r
}

// Decides says whether this autoscaler decides pr: it serves it, or the
// API server would have refused it (a class that is no DNS subdomain, from
// a dump), which fails with a condition naming the field.
func (s Serving) Decides(pr *prv1.ProvisioningRequest) bool {
	if s.Serves(pr) {
		return true
	}
	var invalid *InvalidError
	return errors.As(Validate(pr), &invalid) && invalid.Field == "spec.provisioningClassName"
}

// Available says whether pr is decided now: neither finished nor
// provisioned, and when retried, its backoff since the last
// CapacityIsNotFound has passed.
func Available(pr *prv1.ProvisioningRequest, backoff time.Duration, now time.Time) bool {
	if Finished(pr) || IsTrue(pr, prv1.Provisioned) {
		return false
	}
	c := meta.FindStatusCondition(pr.Status.Conditions, prv1.Provisioned)
	if c == nil {
		return true
	}
	return c.Status == metav1.ConditionFalse && now.Sub(c.LastTransitionTime.Time) >= backoff
}

// Consumers are, per request (namespace/name), the scheduled pods that
// consume it.
func Consumers(running []*v1.Pod) map[string][]*v1.Pod {
	out := map[string][]*v1.Pod{}
	for _, pod := range running {
		if name := ConsumedRequest(pod); name != "" && pod.Spec.NodeName != "" {
			key := pod.Namespace + "/" + name
			out[key] = append(out[key], pod)
		}
	}
	return out
}

// AcceptedMessage is the Accepted condition's message.
const AcceptedMessage = "ProvisioningRequest is accepted by draxr-autoscaler"
