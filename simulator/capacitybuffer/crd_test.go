package capacitybuffer

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// jsonFields lists a struct type's JSON field names.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func properties(p apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for name := range p.Properties {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// The chart ships CA's CapacityBuffer CRD (kubernetes-sigs/cluster-autoscaler
// pkg/apis/config/crd, docs/capacity-buffers.md says which commit), and
// the Go types here are its schema field for field, in both versions.
func TestTypesAreTheCRDsSchema(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "draxr", "crds", "autoscaling.x-k8s.io_capacitybuffers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != Group || crd.Spec.Names.Kind != Kind || crd.Spec.Names.Plural != Resource || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Fatalf("CRD names %+v %s", crd.Spec.Names, crd.Spec.Scope)
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
		root := v.Schema.OpenAPIV3Schema.Properties
		for _, c := range []struct {
			path string
			got  apiextensionsv1.JSONSchemaProps
			typ  reflect.Type
		}{
			{"spec", root["spec"], reflect.TypeFor[Spec]()},
			{"status", root["status"], reflect.TypeFor[Status]()},
			{"spec.podTemplateRef", root["spec"].Properties["podTemplateRef"], reflect.TypeFor[LocalObjectRef]()},
			{"spec.scalableRef", root["spec"].Properties["scalableRef"], reflect.TypeFor[ScalableRef]()},
			{"status.podTemplateRef", root["status"].Properties["podTemplateRef"], reflect.TypeFor[LocalObjectRef]()},
		} {
			if got, want := properties(c.got), jsonFields(c.typ); !slices.Equal(got, want) {
				t.Errorf("%s %s: CRD fields %v, Go fields %v", v.Name, c.path, got, want)
			}
		}
		if v.Name == Version && !v.Storage {
			t.Errorf("%s is not the storage version", Version)
		}
	}
	if !slices.Equal(versions, []string{"v1alpha1", "v1beta1"}) {
		t.Errorf("versions %v", versions)
	}
}
