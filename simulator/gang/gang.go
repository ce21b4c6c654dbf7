// Package gang finds the gangs among pods: the pods of a PodGroup
// (scheduling.k8s.io/v1beta1, GenericWorkload) with a gang policy, which
// kube-scheduler binds all at once once minCount of them fit, or not at
// all. The planner plans a gang's pods as one; this package only says who
// belongs to which gang, how many of them run, and what keeps a gang from
// being tried at all.
package gang

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Gang is a PodGroup with a gang policy as the planner sees it.
type Gang struct {
	Namespace string
	Name      string
	// Kind says which API defines it ("PodGroup", or Volcano's).
	Kind string
	// MinCount pods must be scheduled together before any binds.
	MinCount int
	// Pods counts the group's pods that exist and have not ended.
	Pods int
	// Scheduled counts those bound to a node.
	Scheduled int
	// TopologyKey is the node label whose one value all the gang's pods
	// must share (spec.schedulingConstraints.topology[0].key,
	// TopologyAwareWorkloadScheduling); "" for none.
	TopologyKey string
	// scheduledOn counts the scheduled pods per node, for scale-down.
	scheduledOn map[string]int
	// invalid is why the group's topology cannot be planned ("" when it
	// can): the scheduler rejects the group too.
	invalid string
}

// String names the gang as messages do: "PodGroup ml/train".
func (g *Gang) String() string { return g.Kind + " " + g.Namespace + "/" + g.Name }

// Need is how many more pods must be scheduled together before the gang
// binds; 0 once the quorum is met (the rest bind one by one).
func (g *Gang) Need() int { return max(g.MinCount-g.Scheduled, 0) }

// ScheduledNodes are the nodes the gang's scheduled pods run on, sorted.
func (g *Gang) ScheduledNodes() []string {
	out := make([]string, 0, len(g.scheduledOn))
	for n := range g.scheduledOn {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ScheduledOutside counts the gang's scheduled pods on nodes other than
// node and those gone.
func (g *Gang) ScheduledOutside(node string, gone map[string]bool) int {
	n := 0
	for on, c := range g.scheduledOn {
		if on != node && !gone[on] {
			n += c
		}
	}
	return n
}

// Problem is why the scheduler does not try a gang pod at all, so no new
// node helps it: a stable code and a message naming the object and field.
type Problem struct {
	Code    string
	Message string
}

// Codes of Problem.
const (
	// PodGroupNotFound: the pod names a PodGroup that does not exist; the
	// scheduler waits for it.
	PodGroupNotFound = "PodGroupNotFound"
	// GangIncomplete: fewer pods name the group than its minCount; the
	// scheduler waits for the rest to be created.
	GangIncomplete = "GangIncomplete"
	// TopologyInvalid: the group's topology constraint is not one label
	// key; no placement is generated for it.
	TopologyInvalid = "TopologyInvalid"
)

// Index finds each pod's gang.
type Index struct {
	groups map[key]*Gang
	// plain are PodGroups without a gang policy (each pod is scheduled
	// on its own).
	plain map[key]bool
	// volcanoSchedulers are the schedulerNames whose pods Volcano's
	// annotation puts in a gang.
	volcanoSchedulers map[string]bool
}

type key struct{ kind, namespace, name string }

// KindPodGroup is the Kind of a scheduling.k8s.io PodGroup.
const KindPodGroup = "PodGroup"

// VolcanoGroup is a Volcano PodGroup (scheduling.volcano.sh/v1beta1): its
// pods carry VolcanoGroupAnnotation and run when minMember fit.
type VolcanoGroup struct {
	Namespace, Name string
	MinMember       int
}

// Sources are the groups to index.
type Sources struct {
	PodGroups []*schedulingv1beta1.PodGroup
	// Volcano groups count for pods of VolcanoSchedulers only.
	Volcano           []VolcanoGroup
	VolcanoSchedulers []string
}

// NewIndex indexes the groups and counts, per gang, the pods that name
// it: pods is every pod of the cluster (running and pending).
func NewIndex(src Sources, pods []*v1.Pod) *Index {
	ix := &Index{groups: map[key]*Gang{}, plain: map[key]bool{}, volcanoSchedulers: map[string]bool{}}
	for _, pg := range src.PodGroups {
		k := key{KindPodGroup, pg.Namespace, pg.Name}
		if pg.Spec.SchedulingPolicy.Gang == nil {
			ix.plain[k] = true
			continue
		}
		g := &Gang{Namespace: pg.Namespace, Name: pg.Name, Kind: KindPodGroup,
			MinCount: int(pg.Spec.SchedulingPolicy.Gang.MinCount), scheduledOn: map[string]int{}}
		g.TopologyKey, g.invalid = topologyOf(pg)
		ix.groups[k] = g
	}
	for _, name := range src.VolcanoSchedulers {
		ix.volcanoSchedulers[name] = true
	}
	for _, vg := range src.Volcano {
		ix.groups[key{KindVolcano, vg.Namespace, vg.Name}] = &Gang{Namespace: vg.Namespace, Name: vg.Name, Kind: KindVolcano,
			MinCount: vg.MinMember, scheduledOn: map[string]int{}}
	}
	for _, pod := range pods {
		ix.count(pod)
	}
	return ix
}

func (ix *Index) count(pod *v1.Pod) {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return
	}
	k, ok := ix.groupOf(pod)
	if !ok {
		return
	}
	g := ix.groups[k]
	if g == nil {
		return
	}
	g.Pods++
	if pod.Spec.NodeName != "" {
		g.Scheduled++
		g.scheduledOn[pod.Spec.NodeName]++
	}
}

// Of returns the gang of a pod, or nil when the pod is in none (no group,
// or a group without a gang policy); problem is set when the scheduler
// will not try the pod at all.
func (ix *Index) Of(pod *v1.Pod) (*Gang, *Problem) {
	if ix == nil {
		return nil, nil
	}
	k, ok := ix.groupOf(pod)
	if !ok || ix.plain[k] {
		return nil, nil
	}
	g := ix.groups[k]
	if g == nil {
		if k.kind == KindVolcano {
			return nil, &Problem{Code: PodGroupNotFound, Message: fmt.Sprintf(
				"annotation %s names %s %s/%s, which does not exist: Volcano does not schedule the pod until it does",
				VolcanoGroupAnnotation, KindVolcano, pod.Namespace, k.name)}
		}
		return nil, &Problem{Code: PodGroupNotFound, Message: fmt.Sprintf(
			"spec.schedulingGroup.podGroupName names PodGroup %s/%s, which does not exist: the scheduler does not try the pod until it does",
			pod.Namespace, k.name)}
	}
	if g.invalid != "" {
		return g, &Problem{Code: TopologyInvalid, Message: g.invalid}
	}
	if g.Pods < g.MinCount {
		field := "spec.schedulingPolicy.gang.minCount"
		if g.Kind == KindVolcano {
			field = "spec.minMember"
		}
		return g, &Problem{Code: GangIncomplete, Message: fmt.Sprintf(
			"%s: %s is %d but only %d pods name it: the scheduler does not try its pods until %d exist",
			g, field, g.MinCount, g.Pods, g.MinCount)}
	}
	return g, nil
}

// topologyOf is the group's topology key, or why it has none the
// scheduler can use: more than one entry (the API allows one) or a key
// that is not a label key.
func topologyOf(pg *schedulingv1beta1.PodGroup) (key, invalid string) {
	sc := pg.Spec.SchedulingConstraints
	if sc == nil || len(sc.Topology) == 0 {
		return "", ""
	}
	name := KindPodGroup + " " + pg.Namespace + "/" + pg.Name
	if len(sc.Topology) > 1 {
		return "", fmt.Sprintf("%s: spec.schedulingConstraints.topology has %d entries; at most one is allowed, so no placement is planned",
			name, len(sc.Topology))
	}
	key = sc.Topology[0].Key
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "", fmt.Sprintf("%s: spec.schedulingConstraints.topology[0].key %q is not a node label key: %s",
			name, key, strings.Join(errs, "; "))
	}
	return key, ""
}

// OnNode lists the gangs with scheduled pods on node, sorted by name.
func (ix *Index) OnNode(node string) []*Gang {
	if ix == nil {
		return nil
	}
	var out []*Gang
	for _, g := range ix.groups {
		if g.scheduledOn[node] > 0 {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// groupOf is the group a pod names, by the scheduler's field or Volcano's
// annotation.
func (ix *Index) groupOf(pod *v1.Pod) (key, bool) {
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return key{KindPodGroup, pod.Namespace, *sg.PodGroupName}, true
	}
	if name := pod.Annotations[VolcanoGroupAnnotation]; name != "" && ix.volcanoSchedulers[pod.Spec.SchedulerName] {
		return key{KindVolcano, pod.Namespace, name}, true
	}
	return key{}, false
}

// Volcano's gangs: its PodGroup and the annotation its pods carry.
const (
	KindVolcano            = "PodGroup.scheduling.volcano.sh"
	VolcanoScheduler       = "volcano"
	VolcanoGroupAnnotation = "scheduling.k8s.io/group-name"
)
