package estimator

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
)

const zoneLabel = "topology.kubernetes.io/zone"

// Pods of different owners but one shape share cursors, verdicts and the
// fill pattern only when labels cannot change a verdict. A running pod
// whose anti-affinity repels app=db pods from zone a makes db pods differ
// from web pods of the same spec: sharing web's pattern would put db pods
// on zone-a nodes the scheduler refuses them.
func TestAlikePodsShareVerdictsOnlyWhenLabelsCannotMatter(t *testing.T) {
	cases := []struct {
		name string
		// repelDB places a pod whose required anti-affinity rejects app=db
		// pods in zone a (the group's zone).
		repelDB              bool
		wantNodes, wantDBOut int
	}{
		// 5 web + 5 db one-CPU pods on 4-CPU nodes: 3 nodes.
		{name: "no affinity anywhere: owners do not matter", wantNodes: 3},
		// db pods fit nowhere in zone a; web pods need 2 nodes.
		{name: "running pod repels db: db pods stay out", repelDB: true, wantNodes: 2, wantDBOut: 5},
	}
	for _, tc := range cases {
		for _, countOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/countOnly=%v", tc.name, countOnly), func(t *testing.T) {
				h := newEngine(t)
				if tc.repelDB {
					repelling(t, h)
				}
				g := group("zone-a", 4, 0, 0)
				g.Spec.Template.Labels[zoneLabel] = "a"
				pending := concat(labelled(pods("web", 5, 1000, nil), "web"), labelled(pods("db", 5, 1000, nil), "db"))
				res, err := (&BinPacking{Engine: h, Namer: namer, CountOnly: countOnly}).Estimate(g, pending, 100)
				if err != nil {
					t.Fatal(err)
				}
				dbOut := 0
				for _, u := range res.Unplaced {
					if u.Pod.Labels["app"] != "db" || u.Err == nil {
						t.Errorf("unplaced %s (err %v): only db pods may be left out, with a reason", u.Pod.Name, u.Err)
					}
					dbOut++
				}
				if len(res.NewNodes) != tc.wantNodes || dbOut != tc.wantDBOut {
					t.Errorf("%d new nodes, %d db pods left out; want %d and %d", len(res.NewNodes), dbOut, tc.wantNodes, tc.wantDBOut)
				}
				for uid, node := range res.Placed {
					if p, _, ok := h.Snapshot().Pod(uid); ok && tc.repelDB && p.Labels["app"] == "db" {
						t.Errorf("db pod %s placed on %s in zone a", p.Name, node)
					}
				}
			})
		}
	}
}

func labelled(ps []*v1.Pod, app string) []*v1.Pod {
	for _, p := range ps {
		p.Labels = map[string]string{"app": app}
	}
	return ps
}

// repelling adds a zone-a node running a pod that no app=db pod may share
// the zone with.
func repelling(t *testing.T, eng *placement.Engine) {
	t.Helper()
	snap := eng.Snapshot()
	node := fx.Node("old", 4, 16, nil)
	node.Labels[zoneLabel] = "a"
	if err := snap.AddNode(node); err != nil {
		t.Fatal(err)
	}
	guard := fx.Pod("guard", 100, nil)
	guard.Spec.NodeName = "old"
	guard.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			TopologyKey:   zoneLabel,
		}},
	}}
	if err := snap.AddPod(guard); err != nil {
		t.Fatal(err)
	}
}

func TestKindsAlike(t *testing.T) {
	web, db := pods("web", 1, 1000, nil)[0], pods("db", 1, 1000, nil)[0]
	bigger := pods("big", 1, 2000, nil)[0]
	spread := pods("spread", 1, 1000, nil)[0]
	spread.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneLabel,
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
	spread2 := spread.DeepCopy()
	spread2.Name, spread2.UID, spread2.OwnerReferences[0].UID = "spread2", "spread2", "rs-other"
	k := &Kinds{}
	cases := []struct {
		name      string
		a, b      *v1.Pod
		wantAlike bool
	}{
		{"same spec, other owner", web, db, true},
		{"other requests", web, bigger, false},
		{"spread constraints count own labels", spread, spread2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := k.Alike(tc.a) == k.Alike(tc.b); got != tc.wantAlike {
				t.Errorf("Alike(%s) == Alike(%s): %v, want %v", tc.a.Name, tc.b.Name, got, tc.wantAlike)
			}
			if k.Of(tc.a) == k.Of(tc.b) {
				t.Errorf("Of(%s) == Of(%s): pods of different owners must keep their own kinds", tc.a.Name, tc.b.Name)
			}
		})
	}
}
