package scaleup

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

func zoneGroups(zones ...string) []*nodegroup.NodeGroup {
	var out []*nodegroup.NodeGroup
	for _, z := range zones {
		g := draGroup("zone-"+z, 8, 4)
		g.Spec.Template.Labels = map[string]string{v1.LabelTopologyZone: z, v1.LabelHostname: "template-" + z}
		out = append(out, g)
	}
	return out
}

// Pods that spread over zones read the zone only to compare nodes: a
// zone no node is in yet is as good as another, so groups alike but for
// such a zone are estimated once; a zone that already has nodes is not.
func TestGroupsAlikeButForFreshLabelValues(t *testing.T) {
	spread := func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	avoidDB := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: v1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
	}
	for _, tc := range []struct {
		name string
		set  func(*v1.Pod)
		// dbInZoneA runs a pod of app db on a node in zone a.
		dbInZoneA     bool
		want          map[string]int
		wantEstimates string // with three groups, as with one
	}{
		{name: "zone spread, no node yet: one estimate for the three zones", set: spread,
			want: map[string]int{"zone-a": 2}, wantEstimates: "same"},
		{name: "anti-affinity to a zone with nodes: that zone apart", set: avoidDB, dbInZoneA: true,
			want: map[string]int{"zone-b": 2}, wantEstimates: "one more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := func(groups []*nodegroup.NodeGroup) (*Plan, int) {
				snap := snapshot.New()
				if tc.dbInZoneA {
					n := fx.Node("db-node", 64, 256, nil)
					n.Labels[v1.LabelTopologyZone] = "a"
					if err := snap.AddNode(n); err != nil {
						t.Fatal(err)
					}
					db := fx.Pod("db", 100, nil)
					db.Labels = map[string]string{"app": "db"}
					db.Spec.NodeName = "db-node"
					if err := snap.AddPod(db); err != nil {
						t.Fatal(err)
					}
				}
				p := newPlanner(t, snap, groups...)
				pods := replicas("web", 16, 500, fx.GPUs(fx.GPUResource, 1))
				for _, pod := range pods {
					tc.set(pod)
				}
				pl, err := p.Plan(pods)
				if err != nil {
					t.Fatal(err)
				}
				return pl, p.estimates
			}
			pl, three := plan(zoneGroups("a", "b", "c"))
			got := map[string]int{}
			for _, su := range pl.ScaleUps {
				got[su.NodeGroup] += su.NewNodes
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(pl.NoScaleUp) != 0 {
				t.Errorf("new nodes %v, %d pods refused; want %v", got, len(pl.NoScaleUp), tc.want)
			}
			_, one := plan(zoneGroups("b"))
			if verifying() {
				return // the switch estimates every shared group in full too
			}
			if want := map[string]int{"same": one, "one more": one + 1}[tc.wantEstimates]; three != want {
				t.Errorf("%d estimates with three zones, %d with one; want %d", three, one, want)
			}
		})
	}
}

// verifying says whether the verify switch is on in this test binary.
func verifying() bool {
	p, _ := placement.New(context.Background(), snapshot.New(), nil)
	return p.VerifiesShortcuts()
}
