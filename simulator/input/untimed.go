package input

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TimeUntimedPods gives the Pod documents that have no creationTimestamp
// (a manifest planned before it is applied) the times kubectl apply
// would: after every timed pod, one after another in the order the input
// holds them. The scheduler takes pods by creation time, so the plan's
// queue order is then the input's, not the pods' names. Pods a workload
// expands into are left as they are: their controllers, not the file,
// decide when they are created. Pods of a live cluster all have a time.
func (o *Objects) TimeUntimedPods() {
	var latest time.Time
	for _, list := range [][]*v1.Pod{o.RunningPods, o.PendingPods} {
		for _, p := range list {
			if t := p.CreationTimestamp.Time; t.After(latest) {
				latest = t
			}
		}
	}
	next := latest.Add(time.Second)
	for _, p := range o.PendingPods {
		if p.CreationTimestamp.IsZero() && o.generatedBy[keyOf("Pod", p)] == nil {
			p.CreationTimestamp = metav1.NewTime(next)
			next = next.Add(time.Millisecond)
		}
	}
}
