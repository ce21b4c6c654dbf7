package input

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Cluster API's MachineDeployments, MachineSets and MachinePools are node
// groups when they carry CA's annotations, read as the clusterapi cloud
// provider reads them; those CA would not scale are skipped.
func addClusterAPIKinds(handlers map[string]handler) {
	for _, kind := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool} {
		handlers[capi.APIVersion+"/"+kind] = func(p *parser, d doc, raw []byte) {
			what := describe(kind, raw)
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil { // numbers as int64, as from the API
				p.fail(d, what, err)
				return
			}
			if u.GetNamespace() == "" {
				u.SetNamespace(metav1.NamespaceDefault)
			}
			res, err := capi.FromUnstructured(u)
			if err != nil {
				p.fail(d, "", err) // the error names the object
				return
			}
			// The planner reads files only; a referenced ConfigMap is the
			// autoscaler's to resolve.
			if _, _, ok, err := res.ConfigMapRef(); err != nil || ok && res.Annotations[capi.TemplateSlicesAnnotation] == "" {
				if err == nil {
					err = &capi.AnnotationError{Object: res.String(), Annotation: capi.TemplateSlicesConfigMapAnnotation,
						Err: fmt.Errorf("draxr simulate does not read ConfigMaps; give the slices inline in %s", capi.TemplateSlicesAnnotation)}
				}
				p.fail(d, "", err)
				return
			}
			g, err := capi.Build(res, nil, nil)
			if err != nil {
				var ae *capi.AnnotationError
				if errors.As(err, &ae) {
					p.fail(d, "", err) // the error names the object
				} else {
					p.fail(d, what, err)
				}
				return
			}
			if g == nil {
				return
			}
			var errs field.ErrorList
			for _, e := range append(g.Planning.Validate(), validateTemplate(g.Planning)...) {
				if e.Field == "metadata.name" {
					continue // CA's "<Kind>/<namespace>/<name>" is the group's name on purpose
				}
				errs = append(errs, e)
			}
			store(p, d, object{kind, u}, dedupe(errs), &p.out.NodeGroups, g.Planning)
		}
	}
}
