package nodegroup

import (
	"fmt"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// NewNode instantiates the group's template as a node called name, with
// the ResourceSlices its DRA drivers would publish. Each driver's slices
// form one pool named after the node, and resourceSliceCount counts only
// that driver's slices: a pool belongs to one driver, and a wrong count
// makes the allocator treat the pool as incomplete.
func (g *NodeGroup) NewNode(name string) (*v1.Node, []*resourceapi.ResourceSlice) {
	node := g.Spec.Template.DeepCopy()
	node.Name = name
	node.UID = types.UID("draxr-node-" + name)
	node.ResourceVersion = ""
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[GroupLabel] = g.Name
	node.Labels[v1.LabelHostname] = name
	if len(node.Status.Allocatable) == 0 {
		node.Status.Allocatable = node.Status.Capacity.DeepCopy()
	}
	if !hasReadyCondition(node) {
		node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue})
	}

	return node, g.newSlices(name)
}

// NewNodeLike is NewNode(name) made from model, a node NewNode returned
// for the group: the name, UID and hostname label are the new node's, and
// the rest of its metadata, its spec and its status are the model's,
// shared. For nodes that are never modified in place (a snapshot's): a
// scale-up of hundreds of nodes of one group copied the template's status
// for every one of them.
func (g *NodeGroup) NewNodeLike(model *v1.Node, name string) (*v1.Node, []*resourceapi.ResourceSlice) {
	node := *model
	node.Name = name
	node.UID = types.UID("draxr-node-" + name)
	node.Labels = maps.Clone(model.Labels)
	node.Labels[v1.LabelHostname] = name
	return &node, g.newSlices(name)
}

// newSlices are the ResourceSlices the group's DRA drivers would publish
// on a node called name.
func (g *NodeGroup) newSlices(name string) []*resourceapi.ResourceSlice {
	perDriver := map[string]int64{}
	for _, s := range g.Spec.ResourceSlices {
		perDriver[s.Driver]++
	}
	slices := make([]*resourceapi.ResourceSlice, 0, len(g.Spec.ResourceSlices))
	for i := range g.Spec.ResourceSlices {
		// The devices and counters are the template's, shared: slices
		// in a snapshot are never modified in place (a DeviceTaintRule
		// patches a copy), and copying every device of every new node
		// was a fifth of what a large scale-up allocated.
		spec := g.Spec.ResourceSlices[i]
		spec.NodeName = ptr.To(name)
		spec.AllNodes = nil
		spec.NodeSelector = nil
		spec.Pool = resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: perDriver[spec.Driver]}
		slices = append(slices, &resourceapi.ResourceSlice{
			ObjectMeta: sliceMeta(name, spec.Driver, i),
			Spec:       spec,
		})
	}
	return slices
}

// Group returns the group a node belongs to by its label, or "".
func Group(node *v1.Node) string { return node.Labels[GroupLabel] }

func hasReadyCondition(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return true
		}
	}
	return false
}

func sliceMeta(nodeName, driver string, i int) (m metav1.ObjectMeta) {
	m.Name = sliceName(nodeName, driver, i)
	m.UID = types.UID("draxr-slice-" + m.Name)
	return m
}

func sliceName(nodeName, driver string, i int) string {
	return fmt.Sprintf("%s-%s-%d", nodeName, strings.ReplaceAll(driver, ".", "-"), i)
}

// SliceNames are the names of the slices NewNode(name) returns, without
// making them: a provider checking each of thousands of nodes for its
// slices made a node and its slices for each.
func (g *NodeGroup) SliceNames(name string) []string {
	names := make([]string, len(g.Spec.ResourceSlices))
	for i := range g.Spec.ResourceSlices {
		names[i] = sliceName(name, g.Spec.ResourceSlices[i].Driver, i)
	}
	return names
}
