// CA's evictability rules, as CA documents them (not the autoscaler's
// code): which pods scale-down may take off a node.

package checker

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// nonEvictable says why CA's rules keep the pod on its node, or "".
func (c *Checker) nonEvictable(p *v1.Pod) string {
	if p.DeletionTimestamp != nil || terminal(p) {
		return ""
	}
	if p.Annotations[SafeToEvictAnnotation] == "false" {
		return SafeToEvictAnnotation + "=false"
	}
	safe := p.Annotations[SafeToEvictAnnotation] == "true"
	if !safe {
		if local := c.localVolumes(p); local != "" {
			return "local storage (" + local + ")"
		}
	}
	if metav1.GetControllerOf(p) == nil && !safe {
		return "no controller"
	}
	covered := false
	for _, pdb := range c.pdbs {
		if pdb.Namespace != p.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		covered = true
		if pdb.Status.DisruptionsAllowed < 1 {
			return "PodDisruptionBudget " + pdb.Name + " allows no disruption"
		}
	}
	if p.Namespace == metav1.NamespaceSystem && !covered && !safe {
		return "kube-system pod without a PodDisruptionBudget"
	}
	return ""
}

func (c *Checker) localVolumes(p *v1.Pod) string {
	allowed := map[string]bool{}
	for _, v := range strings.Split(p.Annotations[SafeToEvictLocalVolumesAnnotation], ",") {
		allowed[strings.TrimSpace(v)] = true
	}
	for _, v := range p.Spec.Volumes {
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory)
		if local && !allowed[v.Name] {
			return "volume " + v.Name
		}
	}
	return ""
}
