package input

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	schedulingvalidation "k8s.io/kubernetes/pkg/apis/scheduling/validation"

	"draxr.dev/draxr/simulator/gang"

	// Registers the scheduling.k8s.io conversions the validation needs.
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
)

// VolcanoPodGroupAPIVersion is Volcano's PodGroup API, read as written
// (its Go module is not a dependency of draxr).
const VolcanoPodGroupAPIVersion = "scheduling.volcano.sh/v1beta1"

// addGangKinds adds the PodGroups that make gangs: the scheduler's
// (scheduling.k8s.io/v1beta1, GenericWorkload) and Volcano's.
func addGangKinds(handlers map[string]handler) {
	handlers["scheduling.k8s.io/v1beta1/PodGroup"] = storedKind[schedulingv1beta1.PodGroup]("PodGroup", true,
		schedulingvalidation.ValidatePodGroup,
		func(o *Objects) *[]*schedulingv1beta1.PodGroup { return &o.PodGroups })
	handlers[VolcanoPodGroupAPIVersion+"/PodGroup"] = func(p *parser, d doc, raw []byte) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			p.fail(d, describe(gang.KindVolcano, raw), err)
			return
		}
		prepareMeta(gang.KindVolcano, u, true, d.loc)
		if _, err := VolcanoGroup(u); err != nil {
			p.fail(d, gang.KindVolcano+" "+u.GetNamespace()+"/"+u.GetName(), err)
			return
		}
		store(p, d, object{gang.KindVolcano, u}, nil, &p.out.VolcanoPodGroups, u)
	}
}

// VolcanoGroup reads a Volcano PodGroup's spec.minMember.
func VolcanoGroup(u *unstructured.Unstructured) (gang.VolcanoGroup, error) {
	minMember, found, err := unstructured.NestedInt64(u.Object, "spec", "minMember")
	switch {
	case err != nil:
		return gang.VolcanoGroup{}, fmt.Errorf("spec.minMember: %w", err)
	case !found:
		// Volcano's default: a group of one pod.
		minMember = 1
	case minMember < 0:
		return gang.VolcanoGroup{}, fmt.Errorf("spec.minMember: %d must be 0 or more", minMember)
	}
	return gang.VolcanoGroup{Namespace: u.GetNamespace(), Name: u.GetName(), MinMember: int(minMember)}, nil
}

// Gangs indexes the objects' gangs for the planner: PodGroups when the
// scheduler serves them (GenericWorkload on), Volcano's when its
// scheduler is among bypassed (--bypassed-scheduler-names). Nil when
// neither applies: every pod is planned on its own. Gangs count pods
// (nil: the running and pending pods).
func (o *Objects) Gangs(bypassed []string, pods []*v1.Pod) *gang.Index {
	src := gang.Sources{}
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		src.PodGroups = o.PodGroups
	}
	if slices.Contains(bypassed, gang.VolcanoScheduler) {
		src.VolcanoSchedulers = []string{gang.VolcanoScheduler}
		for _, u := range o.VolcanoPodGroups {
			if vg, err := VolcanoGroup(u); err == nil {
				src.Volcano = append(src.Volcano, vg)
			}
		}
	}
	if src.PodGroups == nil && src.VolcanoSchedulers == nil {
		return nil
	}
	if pods == nil {
		pods = make([]*v1.Pod, 0, len(o.RunningPods)+len(o.PendingPods))
		pods = append(append(pods, o.RunningPods...), o.PendingPods...)
	}
	return gang.NewIndex(src, pods)
}
