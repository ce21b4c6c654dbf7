package provreq

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
)

const rack = "example.com/rack"

// rackCluster has, per rack, free 8-GPU nodes of that rack and a group
// gpu-<rack> of such nodes up to max (a group of no rack when the rack is
// ""), and a DRA class for example.com/gpu.
type rackSpec struct {
	rack       string
	nodes, max int
}

func rackCluster(t *testing.T, racks ...rackSpec) (*scaleup.Planner, *snapshot.Snapshot) {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
	var groups []*nodegroup.NodeGroup
	for _, r := range racks {
		name := "gpu-" + r.rack
		if r.rack == "" {
			name = "gpu-anywhere"
		}
		for i := range r.nodes {
			node := fx.Node(fmt.Sprintf("%s-%d", name, i), 64, 256, nil)
			node.Labels[nodegroup.GroupLabel] = name
			node.Labels[rack] = r.rack
			if err := snap.AddNode(node); err != nil {
				t.Fatal(err)
			}
			if err := snap.AddResourceSlice(fx.GPUSlice(node.Name, 8)); err != nil {
				t.Fatal(err)
			}
		}
		tmpl := *fx.Node("template", 64, 256, nil)
		if r.rack != "" {
			tmpl.Labels[rack] = r.rack
		}
		slice := fx.GPUSlice("x", 8)
		groups = append(groups, &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: nodegroup.Spec{MaxSize: r.max, Template: tmpl, ResourceSlices: []resourceapi.ResourceSliceSpec{slice.Spec}}})
	}
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := expander.New("least-waste", nil, 1)
	return &scaleup.Planner{Engine: eng, Groups: groups, Expander: exp}, snap
}

// topoTemplate asks one GPU a pod and carries Kueue's annotation ann=key.
func topoTemplate(name, ann, key string) *v1.PodTemplate {
	t := podTemplate(name, fx.Pod("x", 500, fx.GPUs(fx.GPUResource, 1)))
	if ann != "" {
		t.Template.Annotations = map[string]string{ann: key}
	}
	return t
}

// A request whose PodTemplate requires one rack is decided in one rack:
// atomic gets all its new nodes in the rack needing fewest, the domain
// in provisioningClassDetails with the Provisioned condition; when no rack
// holds it, no node at all and the reason names every rack. A preferred
// request falls back to any placement; check-capacity is found only when
// one rack's existing nodes hold it all.
func TestRequestInOneDomain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		class      string
		ann        string
		count      int
		racks      []rackSpec
		wantRack   string // "" when not placed in a domain
		wantNodes  map[string]int
		wantStatus metav1.ConditionStatus
		wantText   []string
	}{
		{name: "atomic: the rack with existing room needs fewer nodes", class: BestEffortAtomic, ann: RequiredTopologyAnnotation, count: 16,
			racks:    []rackSpec{{rack: "a", nodes: 0, max: 4}, {rack: "b", nodes: 1, max: 4}},
			wantRack: "b", wantNodes: map[string]int{"gpu-b": 1}, wantStatus: metav1.ConditionTrue,
			wantText: []string{"in example.com/rack=b"}},
		{name: "atomic: no rack grows enough, none is asked for", class: BestEffortAtomic, ann: RequiredTopologyAnnotation, count: 24,
			racks:      []rackSpec{{rack: "a", nodes: 1, max: 2}, {rack: "b", nodes: 0, max: 2}, {rack: "", max: 10}},
			wantStatus: metav1.ConditionFalse,
			wantText: []string{"requires one domain of example.com/rack, and no domain holds all 24 pods",
				"example.com/rack=a: ", "max size 2 leaves room for 1", "example.com/rack=b: ",
				"node group gpu-anywhere: its template has no label example.com/rack"}},
		{name: "atomic preferred: no rack holds it, planned as without topology", class: BestEffortAtomic, ann: PreferredTopologyAnnotation, count: 24,
			racks:      []rackSpec{{rack: "a", nodes: 0, max: 2}, {rack: "b", nodes: 0, max: 2}, {rack: "", max: 10}},
			wantNodes:  map[string]int{"gpu-anywhere": 3},
			wantStatus: metav1.ConditionTrue},
		{name: "atomic required: the same request gets nothing", class: BestEffortAtomic, ann: RequiredTopologyAnnotation, count: 24,
			racks:      []rackSpec{{rack: "a", nodes: 0, max: 2}, {rack: "b", nodes: 0, max: 2}, {rack: "", max: 10}},
			wantStatus: metav1.ConditionFalse},
		{name: "check-capacity: one rack's nodes hold it", class: CheckCapacity, ann: RequiredTopologyAnnotation, count: 8,
			racks:    []rackSpec{{rack: "a", nodes: 1, max: 0}, {rack: "b", nodes: 1, max: 0}},
			wantRack: "a", wantStatus: metav1.ConditionTrue},
		{name: "check-capacity: room in two racks is not found", class: CheckCapacity, ann: RequiredTopologyAnnotation, count: 12,
			racks:      []rackSpec{{rack: "a", nodes: 1, max: 0}, {rack: "b", nodes: 1, max: 0}},
			wantStatus: metav1.ConditionFalse,
			wantText:   []string{"example.com/rack=a: 8 of 12 pods fit its 1 existing nodes; example.com/rack=b: 8 of 12 pods fit its 1 existing nodes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := rackCluster(t, tc.racks...)
			pr := request("train", tc.class, "workers", tc.count)
			e := Decider{Planner: p, Templates: templates(topoTemplate("workers", tc.ann, rack))}
			d, err := e.Decide(context.Background(), pr)
			if err != nil {
				t.Fatal(err)
			}
			if d.Condition.Status != tc.wantStatus {
				t.Fatalf("condition %+v, want status %s", d.Condition, tc.wantStatus)
			}
			for _, want := range tc.wantText {
				if !strings.Contains(d.Condition.Message, want) {
					t.Errorf("message %q lacks %q", d.Condition.Message, want)
				}
			}
			got := map[string]int{}
			for _, su := range d.ScaleUps {
				got[su.NodeGroup] += su.NewNodes
			}
			if fmt.Sprint(got) != fmt.Sprint(orEmpty(tc.wantNodes)) {
				t.Errorf("new nodes %v, want %v", got, tc.wantNodes)
			}
			Apply(pr, d, fx.Epoch)
			details := pr.Status.ProvisioningClassDetails
			switch {
			case tc.wantRack == "" && len(details) > 0:
				t.Errorf("details %v, want none", details)
			case tc.wantRack != "" && (d.Topology == nil || string(details[rack]) != tc.wantRack || !IsTrue(pr, prv1.Provisioned)):
				t.Errorf("details %v, topology %v, conditions %+v; want %s=%s with Provisioned=True", details, d.Topology, pr.Status.Conditions, rack, tc.wantRack)
			}
			if tc.wantRack != "" {
				for _, pl := range d.Existing {
					if !strings.HasPrefix(pl.Node, "gpu-"+tc.wantRack) {
						t.Errorf("pod %s on %s, outside rack %s", pl.Pod, pl.Node, tc.wantRack)
					}
				}
			}
		})
	}
}

func orEmpty(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// A provisioned request books the room of its domain only: a request
// placed in rack b holds b's node, and another request that fits only
// there finds no capacity; with the detail gone it books anywhere.
func TestBookingHoldsTheDomain(t *testing.T) {
	p, snap := rackCluster(t, rackSpec{rack: "a", nodes: 1}, rackSpec{rack: "b", nodes: 1})
	tmpls := templates(topoTemplate("workers", RequiredTopologyAnnotation, rack), topoTemplate("plain", "", ""))
	e := Decider{Planner: p, Templates: tmpls}
	booked := request("booked", CheckCapacity, "workers", 8)
	Set(booked, Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsFound}, fx.Epoch)
	booked.Status.ProvisioningClassDetails = map[string]prv1.Detail{rack: "b"}
	snap.Fork()
	defer snap.Revert()
	bs := e.Book(context.Background(), []*prv1.ProvisioningRequest{booked}, nil)
	if len(bs) != 1 || bs[0].Err != nil || bs[0].Booked != 8 {
		t.Fatalf("booking %+v, want 8 booked", bs)
	}
	// Without the domain the booking would take gpu-a-0, the first node.
	d, err := e.Decide(context.Background(), request("check", CheckCapacity, "plain", 8))
	if err != nil {
		t.Fatal(err)
	}
	onA := 0
	for _, pl := range d.Existing {
		if pl.Node == "gpu-a-0" {
			onA++
		}
	}
	if !d.Provisioned() || onA != 8 {
		t.Errorf("a plain request: %+v, %d pods on gpu-a-0; want all 8 there (the booking holds rack b)", d.Condition, onA)
	}
}

// Two podSets requiring different keys, or a value that is no label key,
// fail the request with a reason naming the template and annotation.
func TestRequestTopologyInvalid(t *testing.T) {
	p, _ := rackCluster(t, rackSpec{rack: "a", nodes: 1, max: 1})
	for _, tc := range []struct {
		name  string
		tmpls []*v1.PodTemplate
		sets  []any
		want  string
	}{
		{name: "two keys", tmpls: []*v1.PodTemplate{topoTemplate("w", RequiredTopologyAnnotation, rack), topoTemplate("l", RequiredTopologyAnnotation, "example.com/block")},
			sets: []any{"w", 1, "l", 1},
			want: `spec.podSets[1].podTemplateRef.name (PodTemplate default/l): annotation kueue.x-k8s.io/podset-required-topology is "example.com/block" but spec.podSets[0].podTemplateRef.name (PodTemplate default/w) requires "example.com/rack"`},
		{name: "not a key", tmpls: []*v1.PodTemplate{topoTemplate("w", RequiredTopologyAnnotation, "rack a")}, sets: []any{"w", 1},
			want: `annotation kueue.x-k8s.io/podset-required-topology: "rack a" is not a node label key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Decider{Planner: p, Templates: templates(tc.tmpls...)}
			d, err := e.Decide(context.Background(), request("bad", BestEffortAtomic, tc.sets...))
			if err != nil {
				t.Fatal(err)
			}
			if d.Condition.Type != prv1.Failed || d.Condition.Reason != ReasonFailedToCreatePods || !strings.Contains(d.Condition.Message, tc.want) {
				t.Errorf("condition %+v, want Failed/FailedToCreatePods with %q", d.Condition, tc.want)
			}
		})
	}
}
