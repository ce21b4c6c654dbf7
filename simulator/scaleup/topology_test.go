package scaleup

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

const rackKey = "example.com/rack"

// rackGroup is an 8-GPU group whose template is in rack value ("" for
// a template without the label).
func rackGroup(name, value string, maxSize int) *nodegroup.NodeGroup {
	g := draGroup(name, 8, maxSize)
	g.Spec.Template.Labels = map[string]string{"pool": "gpu"}
	if value != "" {
		g.Spec.Template.Labels[rackKey] = value
	}
	return g
}

// rackNode adds a live 8-GPU node of group in rack value with used GPUs
// taken by running pods.
func rackNode(t *testing.T, snap *snapshot.Snapshot, name, group, value string) {
	t.Helper()
	n := fx.Node(name, 64, 256, nil)
	n.Labels = map[string]string{nodegroup.GroupLabel: group, rackKey: value, "pool": "gpu"}
	if err := snap.AddNode(n); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddResourceSlice(fx.GPUSlice(name, 8)); err != nil {
		t.Fatal(err)
	}
}

func rackGang(name string, minCount int32) *schedulingv1beta1.PodGroup {
	pg := gangGroup(name, minCount)
	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: rackKey}}}
	return pg
}

// A gang with a topology key gets all its nodes in one domain: the one
// needing the fewest new nodes, its existing room first; a domain whose
// group cannot grow enough is passed over even when its existing room
// would take part of the gang; a group of no known domain never grows.
func TestTopologyGangOneDomain(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	for _, tc := range []struct {
		name      string
		groups    []*nodegroup.NodeGroup
		nodes     [][3]string // name, group, rack
		pods      int
		wantRack  string
		wantNodes map[string]int // per group
		wantOnOld int            // pods planned on existing nodes
	}{
		{name: "rack with room on an existing node needs one node fewer",
			groups: []*nodegroup.NodeGroup{rackGroup("rack-a", "a", 4), rackGroup("rack-b", "b", 4)},
			nodes:  [][3]string{{"a-0", "rack-a", "a"}}, pods: 16,
			wantRack: "a", wantNodes: map[string]int{"rack-a": 1}, wantOnOld: 8},
		{name: "a rack's existing room is not used when its group cannot grow",
			groups: []*nodegroup.NodeGroup{rackGroup("rack-a", "a", 1), rackGroup("rack-b", "b", 4)},
			nodes:  [][3]string{{"a-0", "rack-a", "a"}}, pods: 16,
			wantRack: "b", wantNodes: map[string]int{"rack-b": 2}},
		{name: "a group without the label is never grown",
			groups: []*nodegroup.NodeGroup{rackGroup("any", "", 10), rackGroup("rack-c", "c", 3)}, pods: 24,
			wantRack: "c", wantNodes: map[string]int{"rack-c": 3}},
		{name: "an existing rack without a group fits the gang whole",
			groups: []*nodegroup.NodeGroup{rackGroup("rack-b", "b", 4)},
			nodes:  [][3]string{{"a-0", "", "a"}}, pods: 8,
			wantRack: "", wantNodes: map[string]int{}, wantOnOld: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			for _, n := range tc.nodes {
				rackNode(t, snap, n[0], n[1], n[2])
			}
			p := newPlanner(t, snap, tc.groups...)
			pods := inGroup("train", replicas("train", tc.pods, 500, gpu))
			p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{rackGang("train", int32(tc.pods))}}, pods)
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.NoScaleUp) != 0 {
				t.Fatalf("refused: %+v", plan.NoScaleUp)
			}
			got := map[string]int{}
			for _, su := range plan.ScaleUps {
				got[su.NodeGroup] += su.NewNodes
				if su.Topology == nil || su.Topology.Key != rackKey || su.Topology.Value != tc.wantRack || !su.Atomic {
					t.Errorf("step %s +%d: topology %+v atomic %t, want %s=%s, atomic", su.NodeGroup, su.NewNodes, su.Topology, su.Atomic, rackKey, tc.wantRack)
				}
			}
			if len(got) != len(tc.wantNodes) {
				t.Fatalf("new nodes %v, want %v", got, tc.wantNodes)
			}
			for g, n := range tc.wantNodes {
				if got[g] != n {
					t.Fatalf("new nodes %v, want %v", got, tc.wantNodes)
				}
			}
			if len(plan.ExistingNodes) != tc.wantOnOld {
				t.Errorf("%d pods on existing nodes, want %d: %+v", len(plan.ExistingNodes), tc.wantOnOld, plan.ExistingNodes)
			}
		})
	}
}

// No domain holds the gang: no node at all, and every pod says so with
// the key and each domain's bound, and names the groups of no known
// domain.
func TestTopologyGangNoDomain(t *testing.T) {
	snap := snapshot.New()
	rackNode(t, snap, "a-0", "rack-a", "a")
	// A node of rack-b that sits in rack c: rack-b's domain is unknown.
	rackNode(t, snap, "b-0", "rack-b", "c")
	p := newPlanner(t, snap, rackGroup("rack-a", "a", 2), rackGroup("rack-b", "b", 9), rackGroup("any", "", 9))
	pods := inGroup("train", replicas("train", 24, 500, fx.GPUs(fx.GPUResource, 1)))
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{rackGang("train", 24)}}, pods)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if n := newNodes(plan); n != 0 || len(plan.ExistingNodes) != 0 {
		t.Fatalf("%d new nodes, %d on existing nodes; want none", n, len(plan.ExistingNodes))
	}
	if len(plan.NoScaleUp) != 24 {
		t.Fatalf("%d pods refused, want 24", len(plan.NoScaleUp))
	}
	for _, n := range plan.NoScaleUp {
		for _, want := range []string{
			"PodGroup default/train must run its 24 pods in one domain of example.com/rack (spec.schedulingConstraints.topology[0].key), and no domain holds them",
			"example.com/rack=a: 8 fit its 1 existing nodes, node group rack-a: all 16 pods need 2 new nodes; max size 2 leaves room for 1",
			"example.com/rack=c: 8 fit its 1 existing nodes, no node group makes nodes in it",
			"node group any: its template has no label example.com/rack",
			"node group rack-b: its template says example.com/rack=b but its nodes are in c",
		} {
			if n.Code != TopologyDomainNotFound || !strings.Contains(n.Reason, want) {
				t.Fatalf("pod %s: %s %q, want TopologyDomainNotFound with %q", n.Pod, n.Code, n.Reason, want)
			}
		}
	}
}

// A gang with pods running already is planned in their domain only; one
// whose key is not a label key gets no plan and says why.
func TestTopologyGangRunningAndInvalid(t *testing.T) {
	snap := snapshot.New()
	rackNode(t, snap, "b-0", "rack-b", "b")
	p := newPlanner(t, snap, rackGroup("rack-a", "a", 4), rackGroup("rack-b", "b", 4))
	gpu := fx.GPUs(fx.GPUResource, 1)
	all := inGroup("train", replicas("train", 24, 500, gpu))
	for _, pod := range all[:8] {
		pod.Spec.NodeName = "b-0"
	}
	bad := inGroup("bad", replicas("bad", 2, 500, gpu))
	badGroup := rackGang("bad", 2)
	badGroup.Spec.SchedulingConstraints.Topology[0].Key = "not a key!"
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{rackGang("train", 24), badGroup}}, append(append([]*v1.Pod{}, all...), bad...))
	plan, err := p.Plan(append(append([]*v1.Pod{}, all[8:]...), bad...))
	if err != nil {
		t.Fatal(err)
	}
	// b-0's 8 GPUs are free in the snapshot (the running pods are not in
	// it): 8 more pods there, 8 on a new node of rack-b, none in rack a.
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "rack-b" || plan.ScaleUps[0].NewNodes != 1 || len(plan.ExistingNodes) != 8 {
		t.Fatalf("scale-ups %+v, %d on existing nodes; want rack-b +1 beside the running pods and 8 on b-0", plan.ScaleUps, len(plan.ExistingNodes))
	}
	if len(plan.NoScaleUp) != 2 {
		t.Fatalf("refused %+v, want bad's 2 pods", plan.NoScaleUp)
	}
	for _, n := range plan.NoScaleUp {
		if n.Code != TopologyInvalid || !strings.Contains(n.Reason, `spec.schedulingConstraints.topology[0].key "not a key!" is not a node label key`) {
			t.Errorf("pod %s: %s %q", n.Pod, n.Code, n.Reason)
		}
	}
}

// Alike domains are planned once per gang shape; the plan is the one
// planning every domain in full gives: same steps, racks, placements and
// reasons, with racks alike, racks full, a rack of another size and a
// rack with room on an existing node.
func TestAlikeDomainsAreTheFullPath(t *testing.T) {
	plan := func(noShortcut bool) *Plan {
		snap := snapshot.New()
		rackNode(t, snap, "r3-0", "rack-3", "r3")
		groups := []*nodegroup.NodeGroup{rackGroup("rack-0", "r0", 2), rackGroup("rack-1", "r1", 2), rackGroup("rack-2", "r2", 6),
			rackGroup("rack-3", "r3", 2), rackGroup("rack-4", "r4", 2)}
		groups[2].Spec.Template.Status.Capacity[v1.ResourceCPU] = fx.Count(32)
		p := newPlanner(t, snap, groups...)
		p.noAlikeDomains = noShortcut
		var pods []*v1.Pod
		var pgs []*schedulingv1beta1.PodGroup
		for i, n := range []int{16, 16, 8, 16, 24, 16, 16, 40} {
			name := fmt.Sprintf("g%d", i)
			pods = append(pods, inGroup(name, replicas(name, n, 500, fx.GPUs(fx.GPUResource, 1)))...)
			pgs = append(pgs, rackGang(name, int32(n)))
		}
		p.Gangs = gang.NewIndex(gang.Sources{PodGroups: pgs}, pods)
		out, err := p.Plan(pods)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	fast, full := plan(false), plan(true)
	a, _ := json.Marshal(fast)
	b, _ := json.Marshal(full)
	if string(a) != string(b) {
		t.Fatalf("with alike domains:\n%s\nin full:\n%s", a, b)
	}
	if len(fast.ScaleUps) == 0 || len(fast.NoScaleUp) == 0 {
		t.Fatalf("want both steps and refusals to compare; got %d and %d", len(fast.ScaleUps), len(fast.NoScaleUp))
	}
}

// Groups alike but for a label share one estimate only when no pod reads
// the label: pods that select zone b, or spread over zones, get zone b's
// or both zones' nodes, not what zone a's estimate said.
func TestGroupsAlikeButForUnreadLabels(t *testing.T) {
	zone := func(name, z string) *nodegroup.NodeGroup {
		g := draGroup(name, 8, 4)
		g.Spec.Template.Labels = map[string]string{v1.LabelTopologyZone: z}
		return g
	}
	for _, tc := range []struct {
		name string
		set  func(*v1.Pod)
		want map[string]int
	}{
		{name: "no pod reads the zone: one estimate, the first group", set: func(*v1.Pod) {}, want: map[string]int{"zone-a": 2}},
		{name: "pods select zone b", set: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelTopologyZone: "b"} },
			want: map[string]int{"zone-b": 2}},
		// A preference is read too; among groups the expander chooses, as in CA.
		{name: "pods prefer zone b", set: func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
				Weight: 1, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
		}, want: map[string]int{"zone-a": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, snapshot.New(), zone("zone-a", "a"), zone("zone-b", "b"))
			pods := replicas("web", 16, 500, fx.GPUs(fx.GPUResource, 1))
			for _, pod := range pods {
				tc.set(pod)
			}
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, su := range plan.ScaleUps {
				got[su.NodeGroup] += su.NewNodes
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(plan.NoScaleUp) != 0 {
				t.Errorf("new nodes %v, refused %d; want %v", got, len(plan.NoScaleUp), tc.want)
			}
		})
	}
}

// Past its quorum a topology gang's pending pods bind one by one, but only
// in its running pods' rack: the new node is rack b's, though rack a has
// room.
func TestTopologyGangPastQuorumStaysInItsDomain(t *testing.T) {
	snap := snapshot.New()
	rackNode(t, snap, "a-0", "rack-a", "a")
	rackNode(t, snap, "b-0", "rack-b", "b")
	p := newPlanner(t, snap, rackGroup("rack-a", "a", 4), rackGroup("rack-b", "b", 4))
	all := inGroup("train", replicas("train", 20, 500, fx.GPUs(fx.GPUResource, 1)))
	for _, pod := range all[:8] {
		pod.Spec.NodeName = "b-0"
	}
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{rackGang("train", 8)}}, all)
	// b-0's GPUs are free in the snapshot: fill them, as the running pods do.
	for _, pod := range replicas("busy", 8, 100, fx.GPUs(fx.GPUResource, 1)) {
		if _, ferr := p.Engine.Place(pod, "b-0"); ferr != nil {
			t.Fatal(ferr)
		}
	}
	plan, err := p.Plan(all[8:])
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ExistingNodes) != 0 || len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "rack-b" || plan.ScaleUps[0].NewNodes != 2 {
		t.Fatalf("on existing %+v, scale-ups %+v; want 12 pods on 2 new rack-b nodes, none on a-0", plan.ExistingNodes, plan.ScaleUps)
	}
}
