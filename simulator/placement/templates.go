package placement

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"
)

// podClaimNameAnnotation is what the resourceclaim controller sets on a
// claim generated from a template.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// ensureTemplateClaims does what the resourceclaim controller does for a
// pod whose claim comes from a template and does not exist yet: it creates
// the claim, owned by the pod, and records its name in the pod status. The
// name is derived from the pod UID, so repeated calls find the same claim.
// A claim the pod's PodGroup holds (DRAWorkloadResourceClaims) is the
// group's: one for all its pods, owned by the group (see GroupClaims).
func (eng *Engine) ensureTemplateClaims(pod *v1.Pod) (*v1.Pod, error) {
	return eng.templateClaims(pod, false)
}

// GroupClaims does for pending pods what the resourceclaim controller does
// with DRAWorkloadResourceClaims on before any of them is scheduled: a
// claim of a pod that matches one of its PodGroup's spec.resourceClaims is
// the group's claim, made once from the group's template (or the one its
// status names) and shared by every pod of the group. Pods come back
// naming those claims in status.resourceClaimStatuses (copies where that
// changed), so every reader sees one shared claim, as in the cluster, and
// not a claim per pod. Without the gate pods are returned as they are. A
// pod whose group claim cannot be made (template missing) is left as it
// is: placing it says why.
func (eng *Engine) GroupClaims(pods []*v1.Pod) []*v1.Pod {
	if !groupClaimsEnabled() {
		return pods
	}
	var out []*v1.Pod
	for i, pod := range pods {
		if pod.Spec.SchedulingGroup == nil || len(pod.Spec.ResourceClaims) == 0 {
			continue
		}
		withClaims, err := eng.templateClaims(pod, true)
		if err != nil || withClaims == pod {
			continue
		}
		if out == nil {
			out = append([]*v1.Pod(nil), pods...)
		}
		out[i] = withClaims
	}
	if out == nil {
		return pods
	}
	return out
}

func groupClaimsEnabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.DRAWorkloadResourceClaims)
}

// groupOf is the pod's PodGroup when its claims may be the group's
// (DRAWorkloadResourceClaims on); nil otherwise. The pod's fields are
// read before the gate: most pods placed have no group.
func (eng *Engine) groupOf(pod *v1.Pod) *schedulingapi.PodGroup {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil || !groupClaimsEnabled() {
		return nil
	}
	return eng.snap.PodGroup(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
}

// templateClaims is ensureTemplateClaims; onlyGroup leaves the pod's own
// claims alone.
func (eng *Engine) templateClaims(pod *v1.Pod, onlyGroup bool) (*v1.Pod, error) {
	var out *v1.Pod
	group := eng.groupOf(pod)
	for i, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil || hasClaimStatus(pod, pc.Name) {
			continue
		}
		var name string
		if group != nil && boundToGroup(pod, group, &pc) {
			var err error
			if name, err = eng.groupClaim(group, pc.Name, *pc.ResourceClaimTemplateName); err != nil {
				return pod, fmt.Errorf("pod %s: spec.resourceClaims[%d]: %w", podKey(pod), i, err)
			}
		} else {
			if onlyGroup {
				continue
			}
			tmpl := eng.snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName)
			if tmpl == nil {
				return pod, fmt.Errorf("pod %s: spec.resourceClaims[%d].resourceClaimTemplateName: ResourceClaimTemplate %s/%s not found",
					podKey(pod), i, pod.Namespace, *pc.ResourceClaimTemplateName)
			}
			name = eng.freeClaimName(pod, pod.Name+"-"+pc.Name+"-", string(pod.UID)+"/"+pc.Name)
			if eng.snap.ResourceClaim(pod.Namespace, name) == nil {
				eng.snap.SetResourceClaim(claimFromTemplate(pod.Namespace, pc.Name, name, ownerOf(pod), tmpl))
			}
		}
		if out == nil {
			out = pod.DeepCopy()
		}
		out.Status.ResourceClaimStatuses = append(out.Status.ResourceClaimStatuses,
			v1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr.To(name)})
	}
	if out == nil {
		return pod, nil
	}
	return out, nil
}

// boundToGroup is the scheduler's test: the pod's claim is its group's
// when the group lists a claim of the same name and template.
func boundToGroup(pod *v1.Pod, group *schedulingapi.PodGroup, pc *v1.PodResourceClaim) bool {
	ref, err := resourceclaim.BindTo(pod, group, pc)
	return err == nil && ref.Resource == "podgroups"
}

// groupClaim returns the name of the group's claim podClaim, making it from
// the template when the group has none yet.
func (eng *Engine) groupClaim(group *schedulingapi.PodGroup, podClaim, template string) (string, error) {
	for _, s := range group.Status.ResourceClaimStatuses {
		if s.Name == podClaim && s.ResourceClaimName != nil && eng.snap.ResourceClaim(group.Namespace, *s.ResourceClaimName) != nil {
			return *s.ResourceClaimName, nil
		}
	}
	tmpl := eng.snap.ResourceClaimTemplate(group.Namespace, template)
	if tmpl == nil {
		return "", fmt.Errorf("PodGroup %s/%s spec.resourceClaims %s: ResourceClaimTemplate %s/%s not found",
			group.Namespace, group.Name, podClaim, group.Namespace, template)
	}
	name := eng.freeClaimNameOf(group.Namespace, group.UID, group.Name+"-"+podClaim+"-", "podgroup/"+string(group.UID)+"/"+podClaim)
	if eng.snap.ResourceClaim(group.Namespace, name) == nil {
		owner := metav1.OwnerReference{APIVersion: schedulingapi.SchemeGroupVersion.String(), Kind: "PodGroup", Name: group.Name, UID: group.UID}
		eng.snap.SetResourceClaim(claimFromTemplate(group.Namespace, podClaim, name, owner, tmpl))
	}
	return name, nil
}

func ownerOf(pod *v1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
}

func hasClaimStatus(pod *v1.Pod, podClaimName string) bool {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == podClaimName {
			return true
		}
	}
	return false
}

func claimFromTemplate(namespace, podClaimName, name string, owner metav1.OwnerReference, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	annotations := map[string]string{podClaimNameAnnotation: podClaimName}
	for k, v := range tmpl.Spec.Annotations {
		annotations[k] = v
	}
	owner.Controller, owner.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       namespace,
			UID:             types.UID("draxr-tmpl-" + string(owner.UID) + "-" + podClaimName),
			Labels:          tmpl.Spec.Labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
}
