// Package nodegroup defines draxr's NodeGroup object (draxr.dev/v1alpha1):
// how a group of identical nodes is described to the planner, the
// autoscaler and the local cloud provider.
package nodegroup

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// APIVersion and Kind identify NodeGroup objects in files.
const (
	APIVersion = "draxr.dev/v1alpha1"
	Kind       = "NodeGroup"
	// GroupLabel marks live nodes as members of a group.
	GroupLabel = "draxr.dev/node-group"
)

// NodeGroup describes a group of identical nodes that can grow and shrink.
type NodeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec `json:"spec"`
}

// Spec is a NodeGroup's size bounds and node template.
type Spec struct {
	MinSize int `json:"minSize"`
	MaxSize int `json:"maxSize"`
	// Template is the Node a new member looks like: labels, taints,
	// capacity and allocatable. Its name is replaced per node.
	Template v1.Node `json:"template"`
	// ResourceSlices are what the node's DRA drivers publish; nodeName and
	// pool are filled in per node, device names are kept.
	ResourceSlices []resourceapi.ResourceSliceSpec `json:"resourceSlices,omitempty"`
	// Price is one node's price per hour, for --expander=price; unset
	// when unknown.
	Price Price `json:"price,omitempty"`
}

// Validate checks what the planner relies on: a valid name,
// 0 <= minSize <= maxSize, a price (when set) that is a number >= 0, and
// unique device names in each template slice.
func (g *NodeGroup) Validate() field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if g.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "a NodeGroup needs a name"))
	} else {
		for _, msg := range apivalidation.NameIsDNSLabel(g.Name, false) {
			errs = append(errs, field.Invalid(meta.Child("name"), g.Name, msg))
		}
	}
	spec := field.NewPath("spec")
	if g.Spec.MinSize < 0 {
		errs = append(errs, field.Invalid(spec.Child("minSize"), g.Spec.MinSize, "must be >= 0"))
	}
	if g.Spec.MaxSize < g.Spec.MinSize {
		errs = append(errs, field.Invalid(spec.Child("maxSize"), g.Spec.MaxSize,
			fmt.Sprintf("must be >= minSize (%d)", g.Spec.MinSize)))
	}
	if _, _, err := g.Spec.Price.Value(); err != nil {
		errs = append(errs, field.Invalid(spec.Child("price"), string(g.Spec.Price),
			"must be a number >= 0: one node's price per hour, e.g. 0.096"))
	}
	for i, s := range g.Spec.ResourceSlices {
		p := spec.Child("resourceSlices").Index(i)
		if s.Driver == "" {
			errs = append(errs, field.Required(p.Child("driver"), "a template slice needs its driver"))
		}
		seen := sets.New[string]()
		for j, d := range s.Devices {
			if seen.Has(d.Name) {
				errs = append(errs, field.Duplicate(p.Child("devices").Index(j).Child("name"), d.Name))
			}
			seen.Insert(d.Name)
		}
	}
	return errs
}

// DeepCopy returns a copy sharing nothing with g.
func (g *NodeGroup) DeepCopy() *NodeGroup {
	out := &NodeGroup{TypeMeta: g.TypeMeta}
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.MinSize, out.Spec.MaxSize = g.Spec.MinSize, g.Spec.MaxSize
	out.Spec.Price = g.Spec.Price
	g.Spec.Template.DeepCopyInto(&out.Spec.Template)
	for i := range g.Spec.ResourceSlices {
		out.Spec.ResourceSlices = append(out.Spec.ResourceSlices, *g.Spec.ResourceSlices[i].DeepCopy())
	}
	return out
}
