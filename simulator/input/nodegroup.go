package input

import (
	"fmt"
	"regexp"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/resource"
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/nodegroup"
)

// addNodeGroupKind adds the handler of draxr's NodeGroup.
func addNodeGroupKind(handlers map[string]handler) {
	handlers[nodegroup.APIVersion+"/"+nodegroup.Kind] = func(p *parser, d doc, raw []byte) {
		g := &nodegroup.NodeGroup{}
		if err := decodeStrict(raw, g); err != nil {
			p.fail(d, describe(nodegroup.Kind, raw), err)
			return
		}
		g.Namespace = "" // NodeGroups are cluster-wide, like Nodes
		tmpl := &g.Spec.Template
		// A template usually lists only capacity; like a kubelet that
		// reserves nothing, allocatable is then all of it. The scheme's
		// defaulting below only covers a missing (nil) allocatable, not "{}".
		if len(tmpl.Status.Allocatable) == 0 && len(tmpl.Status.Capacity) > 0 {
			tmpl.Status.Allocatable = tmpl.Status.Capacity.DeepCopy()
		}
		legacyscheme.Scheme.Default(tmpl)
		errs := append(g.Validate(), validateTemplate(g)...)
		store(p, d, object{nodegroup.Kind, g}, dedupe(errs), &p.out.NodeGroups, g)
	}
}

// validateTemplate runs the API server's Node and ResourceSlice validation
// on the template node and slices as the planner will instantiate them
// (node name, slice nodeName and pool filled in), so a bad label, taint,
// quantity or device attribute fails at load time, not mid-plan. Paths are
// rewritten to point into the NodeGroup.
func validateTemplate(g *nodegroup.NodeGroup) field.ErrorList {
	var errs field.ErrorList
	node := g.Spec.Template.DeepCopy()
	if node.Name == "" {
		node.Name = g.Name
	}
	node.Namespace = ""
	for _, e := range validated(node, &core.Node{}, corevalidation.ValidateNode) {
		e.Field = "spec.template." + e.Field
		errs = append(errs, e)
	}
	slicesPerDriver := map[string]int64{}
	for _, s := range g.Spec.ResourceSlices {
		slicesPerDriver[s.Driver]++
	}
	for i, spec := range g.Spec.ResourceSlices {
		path := field.NewPath("spec", "resourceSlices").Index(i)
		const own = "a template slice describes the new node's own devices; publish shared (network-attached) pools as ResourceSlices of the cluster instead"
		var scope field.ErrorList
		if ptr.Deref(spec.AllNodes, false) {
			scope = append(scope, field.Invalid(path.Child("allNodes"), true, own))
		}
		if spec.NodeSelector != nil {
			scope = append(scope, field.Invalid(path.Child("nodeSelector"), "<node selector>", own))
		}
		if ptr.Deref(spec.PerDeviceNodeSelection, false) {
			scope = append(scope, field.Invalid(path.Child("perDeviceNodeSelection"), true, own))
		}
		if len(scope) > 0 {
			errs = append(errs, scope...)
			continue // the node-scoped checks below would only repeat this
		}
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", g.Name, i)},
			Spec:       *spec.DeepCopy(),
		}
		if slice.Spec.NodeName == nil {
			slice.Spec.NodeName = ptr.To(node.Name)
		}
		if slice.Spec.Pool.Name == "" {
			slice.Spec.Pool.Name = node.Name
		}
		if slice.Spec.Pool.ResourceSliceCount == 0 {
			slice.Spec.Pool.ResourceSliceCount = slicesPerDriver[spec.Driver]
		}
		prefix := fmt.Sprintf("spec.resourceSlices[%d].", i)
		for _, e := range validated(slice, &resource.ResourceSlice{}, resourcevalidation.ValidateResourceSlice) {
			if e.Field != "spec" && !strings.HasPrefix(e.Field, "spec.") {
				continue // the synthetic slice's metadata is not the user's
			}
			if e.Type == field.ErrorTypeDuplicate && deviceEntry.MatchString(e.Field) {
				continue // NodeGroup.Validate reports it, at the device's name
			}
			if e.Field == "spec" {
				e.Field = strings.TrimSuffix(prefix, ".")
			} else {
				e.Field = prefix + strings.TrimPrefix(e.Field, "spec.")
			}
			errs = append(errs, e)
		}
	}
	// A bad counter consumption makes the allocator refuse the new node's
	// whole pool, silently; here it is an error.
	for _, p := range devicepools.TemplateCounterProblems(g.Spec.ResourceSlices) {
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: fmt.Sprintf("spec.resourceSlices[%d].%s", p.Slice, p.Field),
			BadValue: field.OmitValueType{}, Detail: p.Message + "; " + p.Fix})
	}
	return errs
}

var deviceEntry = regexp.MustCompile(`^spec\.devices\[\d+\]$`)

// dedupe drops an error whose field and type an earlier one already
// reported: NodeGroup.Validate and the API validation check some of the
// same things (a slice's driver, duplicate device names).
func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	var out field.ErrorList
	for _, e := range errs {
		k := e.Field + "\x00" + string(e.Type)
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}
