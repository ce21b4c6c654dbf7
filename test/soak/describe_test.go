package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// describePending tells what a pod the checker found waiting too long
// was waiting on: its conditions, its claims' allocations and the
// autoscaler's events about it, so a failed soak can be read.
func describePending(c kubernetes.Interface, message string) string {
	// "pod ns/name pending ..."
	fields := strings.Fields(message)
	if len(fields) < 2 {
		return message
	}
	ns, name, _ := strings.Cut(fields[1], "/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "pending pod %s/%s:", ns, name)
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(&b, " %v", err)
		return b.String()
	}
	fmt.Fprintf(&b, "\n  shape %s node %q phase %s", p.Annotations[shapeAnnotation], p.Spec.NodeName, p.Status.Phase)
	for _, cond := range p.Status.Conditions {
		fmt.Fprintf(&b, "\n  condition %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.ResourceClaimName == nil {
			continue
		}
		claim, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, *st.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  claim %s: %v", *st.ResourceClaimName, err)
			continue
		}
		alloc := "unallocated"
		if a := claim.Status.Allocation; a != nil {
			var devs []string
			for _, r := range a.Devices.Results {
				devs = append(devs, r.Pool+"/"+r.Device)
			}
			alloc = "allocated " + strings.Join(devs, ",")
		}
		fmt.Fprintf(&b, "\n  claim %s: %s, reserved for %d", claim.Name, alloc, len(claim.Status.ReservedFor))
	}
	events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "\n  event %s %s x%d (%s): %s", e.LastTimestamp.Format("15:04:05"), e.Reason, e.Count, e.Source.Component, e.Message)
		}
	}
	return b.String()
}
