// Package live reads cluster state from the API server into the same
// objects the offline planner loads from files, so both plan alike.
package live

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"draxr.dev/draxr/simulator/input"
)

// FromAPI lists nodes, pods (running: bound and not finished; pending:
// unbound), ResourceSlices, DeviceClasses, ResourceClaims and
// ResourceClaimTemplates.
func FromAPI(ctx context.Context, c kubernetes.Interface) (*input.Objects, error) {
	var objs input.Objects
	opts := metav1.ListOptions{}
	nodes, err := c.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		objs.Nodes = append(objs.Nodes, &nodes.Items[i])
	}
	pods, err := c.CoreV1().Pods("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || p.DeletionTimestamp != nil:
		case p.Spec.NodeName != "":
			objs.RunningPods = append(objs.RunningPods, p)
		default:
			objs.PendingPods = append(objs.PendingPods, p)
		}
	}
	r := c.ResourceV1()
	slices, err := r.ResourceSlices().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list resourceslices: %w", err)
	}
	for i := range slices.Items {
		objs.ResourceSlices = append(objs.ResourceSlices, &slices.Items[i])
	}
	classes, err := r.DeviceClasses().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list deviceclasses: %w", err)
	}
	for i := range classes.Items {
		objs.DeviceClasses = append(objs.DeviceClasses, &classes.Items[i])
	}
	claims, err := r.ResourceClaims("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list resourceclaims: %w", err)
	}
	for i := range claims.Items {
		objs.ResourceClaims = append(objs.ResourceClaims, &claims.Items[i])
	}
	templates, err := r.ResourceClaimTemplates("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list resourceclaimtemplates: %w", err)
	}
	for i := range templates.Items {
		objs.ResourceClaimTemplates = append(objs.ResourceClaimTemplates, &templates.Items[i])
	}
	rules, err := r.DeviceTaintRules().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list devicetaintrules: %w", err)
	}
	for i := range rules.Items {
		objs.DeviceTaintRules = append(objs.DeviceTaintRules, &rules.Items[i])
	}
	objs.PlaceBindingPods()
	return &objs, nil
}
