// Package provreq is the planning side of ProvisioningRequests
// (autoscaling.x-k8s.io/v1, CA's batch API): which requests draxr serves,
// the in-memory pods a request stands for, its conditions with CA's
// reasons and timers, and the decisions of the two open classes made on
// the placement engine, where those pods take DRA devices as real pods
// would. It reads and writes nothing in the cluster.
package provreq

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

// The classes draxr serves, CA's two open ones.
const (
	CheckCapacity    = prv1.ProvisioningClassCheckCapacity
	BestEffortAtomic = prv1.ProvisioningClassBestEffortAtomicScaleUp
)

// Pod annotations: a pod that consumes a request's capacity names it; the
// cluster-autoscaler.kubernetes.io keys are CA's older ones, still read.
const (
	ConsumeAnnotation           = prv1.ProvisioningRequestPodAnnotationKey
	ClassAnnotation             = prv1.ProvisioningClassPodAnnotationKey
	DeprecatedConsumeAnnotation = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
	DeprecatedClassAnnotation   = "cluster-autoscaler.kubernetes.io/provisioning-class-name"
)

// Parameters CA reads.
const (
	NoRetryParameter           = "noRetry"
	ProcessorInstanceParameter = "processorInstance"
)

// Condition reasons, CA's.
const (
	ReasonAccepted                       = "Accepted"
	ReasonCapacityIsFound                = "CapacityIsFound"
	ReasonCapacityIsProvisioned          = "CapacityIsProvisioned"
	ReasonCapacityIsNotFound             = "CapacityIsNotFound"
	ReasonFailedToCheckCapacity          = "FailedToCheckCapacity"
	ReasonFailedToCreatePods             = "FailedToCreatePods"
	ReasonFailedToBookCapacity           = "FailedToBookCapacity"
	ReasonExpired                        = "Expired"
	ReasonCapacityReservationTimeExpired = "CapacityReservationTimeExpired"
	ReasonCapacityBookingConsumed        = "CapacityBookingConsumed"
)

// CA's timers: constants in CA too, not flags.
const (
	// ReservationTime is how long capacity stays booked after
	// Provisioned=True.
	ReservationTime = 10 * time.Minute
	// ExpiryTime fails a request never provisioned after this long.
	ExpiryTime = 7 * 24 * time.Hour
	// DeleteAfter deletes a finished request this long after its last
	// Provisioned or Failed change.
	DeleteAfter = 7 * 24 * time.Hour
)

// MaxPods bounds one request's in-memory pods: the API bounds podSets
// (32) but not count, and a typo of a few zeros must not take the
// autoscaler's memory.
const MaxPods = 100_000

// Serving says which requests this autoscaler takes, from
// --check-capacity-processor-instance, as CA decides it.
type Serving struct {
	// ProcessorInstance: when set, only check-capacity requests whose
	// parameters.processorInstance is this name (or, CA's deprecated form,
	// whose class is this name followed by the check-capacity class) are
	// served, and no atomic ones. When empty, check-capacity requests that
	// name a processor instance are left to that instance.
	ProcessorInstance string
}

// Serves says whether pr is this autoscaler's. Others
// (queued-provisioning.gke.io, a typo of a class, another instance's) are
// left alone, without a condition, as CA leaves them.
func (s Serving) Serves(pr *prv1.ProvisioningRequest) bool {
	instance := string(pr.Spec.Parameters[ProcessorInstanceParameter])
	class := pr.Spec.ProvisioningClassName
	if s.ProcessorInstance == "" {
		return (class == CheckCapacity && instance == "") || class == BestEffortAtomic
	}
	if instance != "" {
		return instance == s.ProcessorInstance && class == CheckCapacity
	}
	return class == s.ProcessorInstance+CheckCapacity
}

// IsCheckCapacity says whether pr is of the check-capacity class, in
// either of its spellings.
func IsCheckCapacity(pr *prv1.ProvisioningRequest) bool {
	return strings.HasSuffix(pr.Spec.ProvisioningClassName, CheckCapacity)
}

// Key is namespace/name.
func Key(pr *prv1.ProvisioningRequest) string { return pr.Namespace + "/" + pr.Name }

// ConsumedRequest is the request a pod consumes ("" for none), by CA's
// annotation or its older key.
func ConsumedRequest(pod *v1.Pod) string {
	if name := pod.Annotations[ConsumeAnnotation]; name != "" {
		return name
	}
	return pod.Annotations[DeprecatedConsumeAnnotation]
}

// IsTrue says whether pr has condition t with status True.
func IsTrue(pr *prv1.ProvisioningRequest, t string) bool {
	return meta.IsStatusConditionTrue(pr.Status.Conditions, t)
}

// Finished requests are never tried again: failed, or their booking over.
func Finished(pr *prv1.ProvisioningRequest) bool {
	return IsTrue(pr, prv1.Failed) || IsTrue(pr, prv1.BookingExpired)
}

// Books says whether pr's capacity is held: provisioned, and neither
// finished nor revoked.
func Books(pr *prv1.ProvisioningRequest) bool {
	return IsTrue(pr, prv1.Provisioned) && !Finished(pr) && !IsTrue(pr, prv1.CapacityRevoked)
}

// NoRetry is parameters.noRetry "true": a check-capacity request that
// finds no capacity fails at once instead of being retried.
func NoRetry(pr *prv1.ProvisioningRequest) bool {
	return strings.EqualFold(string(pr.Spec.Parameters[NoRetryParameter]), "true")
}

// TotalPods is the sum of the podSets' counts.
func TotalPods(pr *prv1.ProvisioningRequest) int {
	n := 0
	for _, ps := range pr.Spec.PodSets {
		n += int(max(ps.Count, 0))
	}
	return n
}

// State names where pr is, for metrics and reports: Failed,
// BookingExpired, Provisioned, CapacityIsNotFound (retried), Accepted or
// Pending (not taken up yet).
func State(pr *prv1.ProvisioningRequest) string {
	switch {
	case IsTrue(pr, prv1.Failed):
		return prv1.Failed
	case IsTrue(pr, prv1.BookingExpired):
		return prv1.BookingExpired
	case IsTrue(pr, prv1.Provisioned):
		return prv1.Provisioned
	}
	if c := meta.FindStatusCondition(pr.Status.Conditions, prv1.Provisioned); c != nil {
		return c.Reason
	}
	if IsTrue(pr, prv1.Accepted) {
		return prv1.Accepted
	}
	return "Pending"
}

// Condition is one condition to set on a request.
type Condition struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Set sets c on pr's status, replacing a condition of its type, stamped
// now and with the request's generation, as CA's AddOrUpdateCondition
// does: a retried CapacityIsNotFound moves the transition time, from which
// the next retry's backoff counts.
func Set(pr *prv1.ProvisioningRequest, c Condition, now time.Time) {
	cond := metav1.Condition{
		Type: c.Type, Status: c.Status, Reason: c.Reason, Message: truncate(c.Message),
		ObservedGeneration: pr.Generation, LastTransitionTime: metav1.NewTime(now),
	}
	for i := range pr.Status.Conditions {
		if pr.Status.Conditions[i].Type == c.Type {
			pr.Status.Conditions[i] = cond
			return
		}
	}
	pr.Status.Conditions = append(pr.Status.Conditions, cond)
}

// maxMessage is the CRD's bound on a condition message.
const maxMessage = 32768

func truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return msg[:maxMessage-3] + "..."
}

// Lifecycle is what the timers and consumption say of pr at now, before
// any decision: nil when nothing changes. consumed counts the request's
// pods that are scheduled (ConsumedRequest names it).
func Lifecycle(pr *prv1.ProvisioningRequest, consumed int, now time.Time) *Condition {
	if Finished(pr) {
		return nil
	}
	if c := meta.FindStatusCondition(pr.Status.Conditions, prv1.Provisioned); c != nil && c.Status == metav1.ConditionTrue {
		if total := TotalPods(pr); consumed >= total {
			return &Condition{Type: prv1.BookingExpired, Status: metav1.ConditionTrue, Reason: ReasonCapacityBookingConsumed,
				Message: fmt.Sprintf("Capacity booking consumed: all %d pods scheduled", total)}
		}
		if now.Sub(c.LastTransitionTime.Time) > ReservationTime {
			return &Condition{Type: prv1.BookingExpired, Status: metav1.ConditionTrue, Reason: ReasonCapacityReservationTimeExpired,
				Message: fmt.Sprintf("Capacity reservation time is expired (%v after Provisioned)", ReservationTime)}
		}
		return nil
	}
	// A request without a creation time (written by hand, planned before
	// it is applied) is new.
	if !pr.CreationTimestamp.IsZero() && now.Sub(pr.CreationTimestamp.Time) > ExpiryTime {
		return &Condition{Type: prv1.Failed, Status: metav1.ConditionTrue, Reason: ReasonExpired,
			Message: fmt.Sprintf("ProvisioningRequest is expired: not provisioned within %v of its creation", ExpiryTime)}
	}
	return nil
}

// ShouldDelete says whether a request is old enough to delete, CA's rule:
// its Provisioned or Failed condition (of any status) last changed more
// than DeleteAfter ago. A request still retried changes its Provisioned
// condition at every try, so only abandoned and finished ones qualify.
func ShouldDelete(pr *prv1.ProvisioningRequest, now time.Time) bool {
	for _, t := range []string{prv1.Provisioned, prv1.Failed} {
		if c := meta.FindStatusCondition(pr.Status.Conditions, t); c != nil && now.Sub(c.LastTransitionTime.Time) > DeleteAfter {
			return true
		}
	}
	return false
}

// Order sorts requests as they are taken: oldest first, then by
// namespace and name, so that a loop and the CLI pick the same one.
func Order(prs []*prv1.ProvisioningRequest) {
	slices.SortStableFunc(prs, func(a, b *prv1.ProvisioningRequest) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(Key(a), Key(b))
	})
}
