// Package clusterstate turns what the informers and the cloud provider say
// into the planner's inputs for one autoscaler loop: cluster objects, node
// groups, and nodes that are coming but cannot take pods yet.
package clusterstate

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/view"
)

// State is one loop's view.
type State struct {
	Objects *input.Objects
	// Groups are the provider's groups as the planner sees them (a group
	// whose template cannot be read is left out, see Errors).
	Groups []*nodegroup.NodeGroup
	// Unschedulable are pending pods the scheduler has given up on.
	Unschedulable []*v1.Pod
	// Binding maps a node to the pods (namespace/name) the scheduler is
	// binding to it: placed there, their devices allocated there, not
	// bound yet. They are in Objects.RunningPods on that node, as the
	// scheduler assumes them: the node is in use, not empty.
	Binding map[string][]string
	// SchedulerUnprocessed counts pending pods the scheduler has not
	// tried yet (no PodScheduled condition), CA's scheduler_unprocessed.
	SchedulerUnprocessed int
	// BindingNodeUnknown are pods the scheduler is binding to a node the
	// loop cannot tell yet (the pod's claim status written, the claim not
	// yet seen). No scale-up is asked for them; scale-down places them as
	// pending pods (CA, which knows nothing of binding, does the same), so
	// the node they go to is not found empty meanwhile.
	BindingNodeUnknown []*v1.Pod
	// AllPods are every pod of the cache: a gang counts its pods wherever
	// they are (pending ones the scheduler has not tried too).
	AllPods []*v1.Pod
	// WaitingForBinding are the pods being bound whose claims wait for
	// device binding conditions (KEP-5007), by UID.
	WaitingForBinding map[types.UID]input.BindingWaiter
	// Gangs are the loop's gangs (nil when none is served).
	Gangs *gang.Index
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
	// GroupHealthy says, per group, whether its unready nodes are within
	// the limits (CA's node group health).
	GroupHealthy map[string]bool
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
	// ResourceUnready are those of Unready that are Ready but whose DRA
	// drivers never published their ResourceSlices (CA's resourceUnready).
	ResourceUnready int
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

func (st *State) addPods(l view.View, bypassed []string, wait input.BindingWait, carry *carried) error {
	pods, err := l.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	// One list of claims serves both which pods are in binding and the
	// snapshot: a claim created between two lists would be in the
	// snapshot while its pod still counted as pending, and planned again
	// that pod fits nowhere (its claim already asks for devices), which
	// sends all its siblings to new nodes.
	if l.Claims != nil {
		if st.Objects.ResourceClaims, err = l.Claims.List(labels.Everything()); err != nil {
			return err
		}
	}
	st.Objects.ResourceClaims = input.DropFailedBindings(st.Objects.ResourceClaims, wait)
	inBinding := carry.binding.podsInBinding(st.Objects.ResourceClaims)
	st.WaitingForBinding = input.WaitingOnBindingConditions(st.Objects.ResourceClaims, wait)
	inSnapshot := map[string]bool{}
	for _, n := range st.Objects.Nodes {
		inSnapshot[n.Name] = true
	}
	carry.order.sort(pods)
	classes := make([]input.PodClass, len(pods))
	for i, p := range pods {
		classes[i] = input.ClassifyPod(p, inBinding)
		if classes[i] == input.PodUnprocessed && unprocessedBypassed(p, bypassed) {
			classes[i] = input.PodUnschedulable // no scheduler of its will try it
		}
	}
	givenUp := givenUpControllers(pods, classes)
	for i, p := range pods {
		class := classes[i]
		if class == input.PodUnprocessed && !input.Tried(p) && givenUpSibling(givenUp, p) {
			// The scheduler gave up on a sibling and has not reached this
			// one yet: a burst (a 1,000-pod Job) gets one scale-up, not one
			// a batch of marks. It is planned like the sibling: on free
			// room first, new nodes only for what does not fit there.
			class = input.PodUnschedulable
			st.SchedulerUnprocessed++
		}
		switch input.LoopFiling(class) {
		case input.OnItsNode:
			if inSnapshot[p.Spec.NodeName] {
				st.Objects.RunningPods = append(st.Objects.RunningPods, p)
			}
		case input.OnAssumedNode:
			node := input.AssumedNode(inBinding, p)
			if node == "" || !inSnapshot[node] {
				st.BindingNodeUnknown = append(st.BindingNodeUnknown, p)
				continue
			}
			assumed := *p
			assumed.Spec.NodeName = node
			st.Objects.RunningPods = append(st.Objects.RunningPods, &assumed)
			if st.Binding == nil {
				st.Binding = map[string][]string{}
			}
			st.Binding[node] = append(st.Binding[node], p.Namespace+"/"+p.Name)
		case input.ToPlan:
			st.Unschedulable = append(st.Unschedulable, p)
		case input.NotTriedYet:
			if !input.Tried(p) {
				st.SchedulerUnprocessed++
			}
		}
	}
	st.Objects.PendingPods = st.Unschedulable
	st.AllPods = pods
	return nil
}

func (st *State) addDRA(l view.View) error {
	all := labels.Everything()
	classes, err := l.Classes.List(all)
	if err != nil {
		return err
	}
	st.Objects.DeviceClasses = classes
	templates, err := l.Templates.List(all)
	if err != nil {
		return err
	}
	st.Objects.ResourceClaimTemplates = templates
	// A fake or older set-up may have no DeviceTaintRule informer.
	if l.TaintRules != nil {
		rules, err := l.TaintRules.List(all)
		if err != nil {
			return err
		}
		st.Objects.DeviceTaintRules = rules
	}
	if err := l.AddGangs(st.Objects); err != nil {
		return err
	}
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

// TemplateError is a group template whose ResourceSlices no allocator
// would use: the group is left out of scale-up until it is fixed.
type TemplateError struct {
	Group    string
	Problems []string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("node group %s: template ResourceSlices: %s", e.Group, strings.Join(e.Problems, "; "))
}

// PlanningGroup is the provider's group as the planner reads it. A
// template whose devices consume counters their pool does not declare
// (or more than it holds) is a *TemplateError: the allocator would
// refuse every new node's pool, and each pod would be told "invalid
// resource pools" instead of what to fix.
func PlanningGroup(ng cloudprovider.NodeGroup) (*nodegroup.NodeGroup, error) {
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
	if problems := devicepools.TemplateCounterProblems(g.Spec.ResourceSlices); len(problems) > 0 {
		e := &TemplateError{Group: ng.Id()}
		for _, p := range problems {
			e.Problems = append(e.Problems, fmt.Sprintf("resourceSlices[%d].%s: %s (fix: %s)", p.Slice, p.Field, p.Message, p.Fix))
		}
		return nil, e
	}
	return g, nil
}

// gpuResource is the device-plugin GPU resource CA's metrics label
// (CA's default GPU resource name).
const gpuResource v1.ResourceName = "nvidia.com/gpu"

// MetricLabels are CA's GPU and DRA labels of a group's new nodes: the
// device-plugin GPU resource its template advertises and the drivers of
// its template ResourceSlices. The GPU type stays "": draxr's groups have
// no GPU type label to read it from.
func MetricLabels(g *nodegroup.NodeGroup) metrics.GroupLabels {
	var l metrics.GroupLabels
	if g == nil {
		return l
	}
	if q, ok := g.Spec.Template.Status.Allocatable[gpuResource]; ok && !q.IsZero() {
		l.GPUResourceName = string(gpuResource)
	}
	for _, s := range g.Spec.ResourceSlices {
		l.DRADrivers = append(l.DRADrivers, s.Driver)
	}
	return l
}

// givenUpControllers are the controllers (with their pods' scheduler)
// one of whose pods the scheduler gave up on.
func givenUpControllers(pods []*v1.Pod, classes []input.PodClass) map[input.SiblingKey]bool {
	out := map[input.SiblingKey]bool{}
	for i, p := range pods {
		if classes[i] != input.PodUnschedulable {
			continue
		}
		if key, ok := input.SiblingKeyOf(p); ok {
			out[key] = true
		}
	}
	return out
}

// unprocessedBypassed reports a pod of a bypassed scheduler that no
// scheduler has tried yet (no PodScheduled condition).
func unprocessedBypassed(p *v1.Pod, bypassed []string) bool {
	return slices.Contains(bypassed, input.SchedulerName(p)) && !input.Tried(p)
}

// givenUpSibling is true for a pod one of whose siblings the scheduler
// gave up on.
func givenUpSibling(givenUp map[input.SiblingKey]bool, p *v1.Pod) bool {
	key, ok := input.SiblingKeyOf(p)
	return ok && givenUp[key]
}
