// Package clusterstate turns what the informers and the cloud provider say
// into the planner's inputs for one autoscaler loop: cluster objects, node
// groups, and nodes that are coming but cannot take pods yet.
package clusterstate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/live"
	"draxr.dev/draxr/simulator/nodegroup"
)

// Listers are the informer caches the autoscaler reads: the planner's
// (the same reader draxr simulate --kubeconfig uses), plus what only the
// live loop needs.
type Listers struct {
	live.Listers
	PDBs       policylisters.PodDisruptionBudgetLister
	DaemonSets appslisters.DaemonSetLister
}

// NewListers registers the informers with the factory (start it after).
func NewListers(f informers.SharedInformerFactory) Listers {
	return Listers{
		Listers:    live.NewListers(f),
		PDBs:       f.Policy().V1().PodDisruptionBudgets().Lister(),
		DaemonSets: f.Apps().V1().DaemonSets().Lister(),
	}
}

// State is one loop's view.
type State struct {
	Objects *input.Objects
	// Groups are the provider's groups as the planner sees them (a group
	// whose template cannot be read is left out, see Errors).
	Groups []*nodegroup.NodeGroup
	// Unschedulable are pending pods the scheduler has given up on.
	Unschedulable []*v1.Pod
	// Upcoming counts, per group, nodes asked for that cannot take pods
	// yet (not registered, not Ready, or devices not yet published); they
	// are in Objects as template nodes so the same pods do not trigger a
	// second scale-up.
	Upcoming map[string]int
	// Ready lists nodes that are Ready with their devices published, the
	// only ones scale-down may touch.
	Ready map[string]bool
	// GroupOf maps node names to their group (managed nodes only).
	GroupOf map[string]string
	// Readiness counts nodes as the Cluster Autoscaler does, cluster-wide
	// and per group.
	Readiness      Readiness
	GroupReadiness map[string]Readiness
	// Healthy is false when more nodes are unready than
	// --ok-total-unready-count and --max-total-unready-percentage allow:
	// scale-down then pauses.
	Healthy bool
	// NotForScaleUp says, per group, why the group may not grow this loop
	// (backed off, unhealthy, its provider calls failed).
	NotForScaleUp map[string]string
	// Errors are this loop's problems with single nodes and groups
	// (provider calls that failed); the others went on regardless.
	Errors []error
	// GivenUp lists nodes (or provider IDs of unregistered instances)
	// removed this loop because they failed to come up.
	GivenUp []string
}

// Readiness counts nodes by state, with CA's names.
type Readiness struct {
	Ready int
	// Unready nodes were Ready once, or have been starting for longer
	// than --max-node-startup-time.
	Unready int
	// NotStarted nodes registered recently and are not Ready yet (or
	// their devices are not published yet).
	NotStarted int
	// Unregistered instances have no Node yet; LongUnregistered ones
	// have had none for longer than --max-node-provision-time.
	Unregistered     int
	LongUnregistered int
}

// ScaleUpEligible returns the groups the planner may grow this loop.
func (st *State) ScaleUpEligible() []*nodegroup.NodeGroup {
	var out []*nodegroup.NodeGroup
	for _, g := range st.Groups {
		if _, no := st.NotForScaleUp[g.Name]; !no {
			out = append(out, g)
		}
	}
	return out
}

// Build reads the listers and the provider with no readiness limits and no
// backoff: the loop uses a Registry, which keeps state across loops.
func Build(l Listers, provider cloudprovider.Provider) (*State, error) {
	return NewRegistry(RegistryConfig{}).Update(context.Background(), l, provider, time.Now())
}

func (st *State) addPods(l Listers, bypassed []string) error {
	pods, err := l.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	inSnapshot := map[string]bool{}
	for _, n := range st.Objects.Nodes {
		inSnapshot[n.Name] = true
	}
	// Compared field by field: building "ns/name" strings in the
	// comparison allocated twice per comparison, a tenth of a 50,000-pod
	// loop.
	slices.SortFunc(pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, p := range pods {
		switch {
		case p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed:
		case p.Spec.NodeName != "":
			if inSnapshot[p.Spec.NodeName] && p.DeletionTimestamp == nil {
				st.Objects.RunningPods = append(st.Objects.RunningPods, p)
			}
		case p.DeletionTimestamp == nil && len(p.Spec.SchedulingGates) == 0 && (unschedulable(p) || unprocessedBypassed(p, bypassed)) && !beingBound(l, p):
			st.Unschedulable = append(st.Unschedulable, p)
		}
	}
	st.Objects.PendingPods = st.Unschedulable
	return nil
}

func (st *State) addDRA(l Listers) error {
	all := labels.Everything()
	classes, err := l.Classes.List(all)
	if err != nil {
		return err
	}
	st.Objects.DeviceClasses = classes
	claims, err := l.Claims.List(all)
	if err != nil {
		return err
	}
	st.Objects.ResourceClaims = claims
	templates, err := l.Templates.List(all)
	if err != nil {
		return err
	}
	st.Objects.ResourceClaimTemplates = templates
	// New nodes run the DaemonSet pods that match them (a fake or older
	// set-up may have no DaemonSet informer).
	if l.DaemonSets != nil {
		sets, err := l.DaemonSets.List(all)
		if err != nil {
			return err
		}
		st.Objects.DaemonSets = sets
	}
	return nil
}

// planningGroup is the provider's group as a NodeGroup object.
func planningGroup(ng cloudprovider.NodeGroup) (*nodegroup.NodeGroup, error) {
	node, slices, err := ng.TemplateNodeInfo()
	if err != nil {
		return nil, fmt.Errorf("node group %s: template: %w", ng.Id(), err)
	}
	g := &nodegroup.NodeGroup{}
	g.Name = ng.Id()
	g.Spec.MinSize, g.Spec.MaxSize = ng.MinSize(), ng.MaxSize()
	g.Spec.Template = *node
	for _, s := range slices {
		g.Spec.ResourceSlices = append(g.Spec.ResourceSlices, s.Spec)
	}
	return g, nil
}

func isReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// beingBound reports a pod the scheduler has placed but not yet bound: its
// devices are allocated and reserved for it (the extended-resource claim
// recorded in its status, or a claim of its own reserved for it). Its old
// Unschedulable condition is stale; planning it again would count its
// devices twice, once in the claim and once for the pod.
func beingBound(l Listers, p *v1.Pod) bool {
	if p.Status.ExtendedResourceClaimStatus != nil && p.Status.ExtendedResourceClaimStatus.ResourceClaimName != "" {
		return true
	}
	if l.Claims == nil {
		return false
	}
	for _, cs := range p.Status.ResourceClaimStatuses {
		if cs.ResourceClaimName == nil {
			continue
		}
		c, err := l.Claims.ResourceClaims(p.Namespace).Get(*cs.ResourceClaimName)
		if err != nil || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.UID == p.UID {
				return true
			}
		}
	}
	return false
}

// unprocessedBypassed reports a pod of a bypassed scheduler that no
// scheduler has tried yet (no PodScheduled condition).
func unprocessedBypassed(p *v1.Pod, bypassed []string) bool {
	name := p.Spec.SchedulerName
	if name == "" {
		name = v1.DefaultSchedulerName
	}
	if !slices.Contains(bypassed, name) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return false
		}
	}
	return true
}

func unschedulable(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
