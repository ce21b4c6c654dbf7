package harness

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podClaimNameAnnotation is what the resourceclaim controller sets on a
// claim generated from a template.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// ensureTemplateClaims does what the resourceclaim controller does for a
// pod whose claim comes from a template and does not exist yet: it creates
// the claim, owned by the pod, and records its name in the pod status. The
// name is derived from the pod UID, so repeated calls find the same claim.
func (h *Harness) ensureTemplateClaims(pod *v1.Pod) (*v1.Pod, error) {
	var out *v1.Pod
	for i, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil || hasClaimStatus(pod, pc.Name) {
			continue
		}
		tmpl := h.snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName)
		if tmpl == nil {
			return pod, fmt.Errorf("pod %s: spec.resourceClaims[%d].resourceClaimTemplateName: ResourceClaimTemplate %s/%s not found",
				podKey(pod), i, pod.Namespace, *pc.ResourceClaimTemplateName)
		}
		name := h.freeClaimName(pod, pod.Name+"-"+pc.Name+"-", string(pod.UID)+"/"+pc.Name)
		if h.snap.ResourceClaim(pod.Namespace, name) == nil {
			h.snap.SetResourceClaim(claimFromTemplate(pod, pc.Name, name, tmpl))
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

func hasClaimStatus(pod *v1.Pod, podClaimName string) bool {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == podClaimName {
			return true
		}
	}
	return false
}

func claimFromTemplate(pod *v1.Pod, podClaimName, name string, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	annotations := map[string]string{podClaimNameAnnotation: podClaimName}
	for k, v := range tmpl.Spec.Annotations {
		annotations[k] = v
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   pod.Namespace,
			UID:         types.UID("draxr-tmpl-" + string(pod.UID) + "-" + podClaimName),
			Labels:      tmpl.Spec.Labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
}
