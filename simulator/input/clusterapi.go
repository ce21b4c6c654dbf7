package input

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Cluster API objects are kept as read, for the clusterapi cloud provider
// to read as it reads them from the API server: MachineDeployments,
// MachineSets and MachinePools (node groups when they carry CA's
// annotations), their Machines, and infrastructure objects (templates a
// group scales from zero with). A scalable object's annotations are
// checked here, so that a bad one is an error naming the file and
// document.
func addClusterAPIKinds(handlers map[string]handler) {
	for _, version := range capi.Versions() {
		for _, kind := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool, capi.Machine} {
			handlers[capi.Group+"/"+version+"/"+kind] = func(p *parser, d doc, raw []byte) {
				p.clusterAPIObject(d, raw, kind)
			}
		}
	}
}

func (p *parser) clusterAPIObject(d doc, raw []byte, kind string) {
	what := describe(kind, raw)
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil { // numbers as int64, as from the API
		p.fail(d, what, err)
		return
	}
	if u.GetName() == "" {
		p.fail(d, what, field.Required(field.NewPath("metadata", "name"), ""))
		return
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(metav1.NamespaceDefault)
	}
	if capi.IsScalableKind(kind) {
		if errs, err := checkScalable(u); err != nil {
			p.fail(d, "", err) // the error names the object
			return
		} else if len(errs) > 0 {
			p.fail(d, fmt.Sprintf("%s %s/%s", kind, u.GetNamespace(), u.GetName()), joinFieldErrors(errs))
			return
		}
	}
	if err := add(p.out, &p.out.ClusterAPI, kind, u, d.loc); err != nil {
		p.fail(d, "", err)
	}
}

// checkScalable reads what the provider will read of a scalable object:
// its bounds, options, template annotations and, when given inline,
// its template slices, validated as the API server validates slices.
func checkScalable(u *unstructured.Unstructured) (field.ErrorList, error) {
	res, err := capi.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	if _, _, err := res.Bounds(); err != nil {
		return nil, err
	}
	if _, err := res.Options(); err != nil {
		return nil, err
	}
	if _, err := res.Price(); err != nil {
		return nil, err
	}
	node, err := res.TemplateNode()
	if err != nil {
		return nil, err
	}
	if _, _, ok, err := res.ConfigMapRef(); err != nil || ok && res.Annotations[capi.TemplateSlicesAnnotation] == "" {
		return nil, err // the ConfigMap is read with the group
	}
	slices, err := res.TemplateSlices(nil)
	if err != nil {
		return nil, err
	}
	g := &nodegroup.NodeGroup{}
	g.Name = nodegroup.NodeNamePrefix(res.ID())
	g.Spec.ResourceSlices = slices
	if node != nil {
		g.Spec.Template = *node
	}
	return append(g.Validate(), validateTemplate(g)...), nil
}
