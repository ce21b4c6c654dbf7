package nodegroup_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// A node made like another is the node NewNode makes under the new name,
// and making it leaves the model as it was.
func TestNewNodeLikeIsNewNode(t *testing.T) {
	tmpl := fx.Node("t", 64, 256, nil)
	tmpl.Labels = map[string]string{"zone": "a"}
	tmpl.Annotations = map[string]string{"note": "x"}
	tmpl.Spec.Taints = []v1.Taint{{Key: "gpu", Effect: v1.TaintEffectNoSchedule}}
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: nodegroup.Spec{Template: *tmpl,
		ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}
	model, _ := g.NewNode("gpu-new-0")
	before := model.DeepCopy()

	got, gotSlices := g.NewNodeLike(model, "gpu-new-1")
	want, wantSlices := g.NewNode("gpu-new-1")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewNodeLike differs from NewNode (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSlices, gotSlices); diff != "" {
		t.Errorf("NewNodeLike's slices differ from NewNode's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, model); diff != "" {
		t.Errorf("NewNodeLike changed the model (-before +after):\n%s", diff)
	}
}

// SliceNames are the names of NewNode's slices, in order, for every
// driver and slice of a group.
func TestSliceNamesAreNewNodes(t *testing.T) {
	nic := fx.GPUSlice("x", 2).Spec
	nic.Driver = "nic.example.com"
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: nodegroup.Spec{Template: *fx.Node("t", 64, 256, nil),
		ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec, nic, fx.GPUSlice("x", 4).Spec}}}
	_, slices := g.NewNode("gpu-a")
	var want []string
	for _, s := range slices {
		want = append(want, s.Name)
	}
	if diff := cmp.Diff(want, g.SliceNames("gpu-a")); diff != "" || len(want) != 3 {
		t.Errorf("SliceNames differ from NewNode's slices (-want +got):\n%s", diff)
	}
}
