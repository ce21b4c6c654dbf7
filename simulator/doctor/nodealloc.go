package doctor

import (
	"fmt"
	"strings"

	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/nodegroup"
)

// CheckNodeAllocatableIgnored: devices that say what node CPU or memory
// their allocation takes (KEP-5517), which draxr does not count.
const CheckNodeAllocatableIgnored = "node-allocatable-resources-ignored"

// nodeAllocatable reports live and template slices whose devices carry
// nodeAllocatableResources: with DRANodeAllocatableResources on, the
// scheduler counts the node CPU and memory their allocations take; draxr
// refuses the gate and plans without them.
func (d *doctor) nodeAllocatable() {
	const why = "devices carry nodeAllocatableResources (KEP-5517): the node CPU or memory an allocation takes is not counted by draxr, " +
		"which plans with DRANodeAllocatableResources off (the gate is refused)"
	const advice = "keep the gate off in the scheduler too, or leave the node's CPU and memory of these devices out of its allocatable"
	for _, s := range d.objs.ResourceSlices {
		if devs := devicepools.NodeAllocatableDevices(&s.Spec); len(devs) > 0 {
			d.add(Finding{Severity: Warning, Check: CheckNodeAllocatableIgnored, Objects: []Object{objectOf("ResourceSlice", s)},
				Message: fmt.Sprintf("%s: %s", strings.Join(devs, "; "), why), Advice: advice})
		}
	}
	for _, g := range d.objs.NodeGroups {
		for i := range g.Spec.ResourceSlices {
			if devs := devicepools.NodeAllocatableDevices(&g.Spec.ResourceSlices[i]); len(devs) > 0 {
				d.add(Finding{Severity: Warning, Check: CheckNodeAllocatableIgnored, Objects: []Object{objectOf(nodegroup.Kind, g)},
					Message: fmt.Sprintf("spec.resourceSlices[%d]: %s: %s", i, strings.Join(devs, "; "), why), Advice: advice})
			}
		}
	}
}

// CheckDaemonSetClaimTemplateMissing: a DaemonSet whose pods name a
// ResourceClaimTemplate that does not exist.
const CheckDaemonSetClaimTemplateMissing = "daemonset-claim-template-missing"

// daemonSetTemplates: such a DaemonSet's pods never start (the claim
// controller cannot make their claims), and a plan counts no device for
// them on new nodes.
func (d *doctor) daemonSetTemplates() {
	have := map[[2]string]bool{}
	for _, t := range d.objs.ResourceClaimTemplates {
		have[[2]string{t.Namespace, t.Name}] = true
	}
	for _, ds := range d.objs.DaemonSets {
		for i, pc := range ds.Spec.Template.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil || have[[2]string{ds.Namespace, *pc.ResourceClaimTemplateName}] {
				continue
			}
			d.add(Finding{Severity: Error, Check: CheckDaemonSetClaimTemplateMissing, Objects: []Object{objectOf("DaemonSet", ds)},
				Message: fmt.Sprintf("spec.template.spec.resourceClaims[%d].resourceClaimTemplateName: ResourceClaimTemplate %s/%s not found: "+
					"the DaemonSet's pods never start, and plans count no device for them on new nodes", i, ds.Namespace, *pc.ResourceClaimTemplateName),
				Advice: "create the ResourceClaimTemplate in the DaemonSet's namespace, or fix the name"})
		}
	}
}
