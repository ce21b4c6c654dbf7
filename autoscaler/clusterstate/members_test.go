package clusterstate

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
)

// byProviderID knows its members by spec.providerID only, as the Cluster
// API provider does: a Machine's node carries no draxr label.
type byProviderID struct{ g fakeGroup }

func (p byProviderID) NodeGroups() []cloudprovider.NodeGroup { return []cloudprovider.NodeGroup{p.g} }
func (p byProviderID) Refresh(context.Context) error         { return nil }
func (p byProviderID) NodeGroupForNode(n *v1.Node) (cloudprovider.NodeGroup, error) {
	if n.Spec.ProviderID != "" && n.Spec.ProviderID == "machine://"+n.Name {
		return p.g, nil
	}
	return nil, nil
}

// A group of max 3 with two Ready members known by providerID, 16 GPUs
// free on them and 30 one-GPU pods pending: the plan adds one node and
// leaves 6 pods without a scale-up. Members the planner did not count let
// it grow the group to 4.
func TestMembersKnownByProviderIDCountTowardMaxSize(t *testing.T) {
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: nodegroup.Spec{MinSize: 1, MaxSize: 3,
		Template: *fx.Node("t", 64, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}
	objs := []runtime.Object{fx.Class("gpu.example.com", "gpu.example.com", fx.GPUResource, time.Unix(0, 0))}
	var members []*v1.Node
	for i := range 2 {
		n := fx.Node(fmt.Sprintf("machine-%d", i), 64, 256, nil)
		n.Spec.ProviderID = "machine://" + n.Name
		members = append(members, n)
		objs = append(objs, n, fx.GPUSlice(n.Name, 8))
	}
	for i := range 30 {
		objs = append(objs, pending(fmt.Sprintf("p-%02d", i), true, false))
	}
	st, err := build(syncedListers(t, objs...), byProviderID{fakeGroup{g: g, target: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Objects.Nodes {
		if nodegroup.Group(n) != "gpu" {
			t.Errorf("node %s is in the snapshot without its group's label", n.Name)
		}
	}
	for _, n := range members {
		if _, ok := n.Labels[nodegroup.GroupLabel]; ok {
			t.Errorf("node %s: the informer's object was labelled, not a copy", n.Name)
		}
	}

	objsToPlan := st.Objects
	objsToPlan.NodeGroups = st.Groups
	res, err := offline.Simulate(context.Background(), objsToPlan, offline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	added := 0
	for _, su := range res.Plan.ScaleUps {
		added += su.NewNodes
	}
	if added != 1 || len(res.Plan.NoScaleUp) != 6 {
		t.Errorf("plan adds %d nodes and leaves %d pods without a scale-up; want 1 node (2 members, max 3) and 6 pods",
			added, len(res.Plan.NoScaleUp))
	}
}
