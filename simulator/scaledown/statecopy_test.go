package scaledown

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// copyCluster builds claimCluster's shape, with a hook per node (its node
// object and slice) and one for the snapshot once filled (nil: none).
func copyCluster(t testing.TB, nodes int, generated bool, nodeHook func(i int, node *v1.Node, slice *resourceapi.ResourceSlice),
	after func(eng *placement.Engine)) *placement.Engine {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch))
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("one-gpu", "gpu.example.com", 1))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range nodes {
		name := fmt.Sprintf("node-%05d", n)
		node, slice := fx.Node(name, 64, 256, nil), fx.GPUSlice(name, 10)
		if nodeHook != nil {
			nodeHook(n, node, slice)
		}
		if err := snap.AddNode(node); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(slice); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			pod := fx.Pod(fmt.Sprintf("%s-job-%d", name, i), 100, nil)
			if generated {
				fx.WithTemplateClaim(pod, "gpu", "one-gpu")
			} else {
				claim := fx.Claim(pod.Name+"-gpu", "gpu.example.com", 1)
				snap.SetResourceClaim(claim)
				fx.WithClaim(pod, "gpu", claim.Name)
			}
			if _, ferr := eng.Place(pod, name); ferr != nil {
				t.Fatal(ferr)
			}
		}
	}
	if after != nil {
		after(eng)
	}
	return eng
}

// State copies are the slow path: on clusters where targets differ in
// shape (a label, a taint, fewer devices, a pool not named after its
// node), in what their pods request, or where copies must stay off (a
// running pod with anti-affinity, a slice shared by all nodes, a pool of
// all nodes the pods take devices from), Find gives
// the same removals, moves and reasons with copies as without, every copy
// held to the scheduler's plugins by DRAXR_VERIFY_SHORTCUTS.
func TestStateCopiesAreTheSlowPath(t *testing.T) {
	t.Setenv(placement.VerifyShortcutsEnv, "1")
	busy := func(eng *placement.Engine, node string) {
		if _, ferr := eng.Place(fx.Pod(node+"-busy", 30000, nil), node); ferr != nil {
			t.Fatal(ferr)
		}
	}
	cases := []struct {
		name   string
		node   func(i int, node *v1.Node, slice *resourceapi.ResourceSlice)
		after  func(eng *placement.Engine)
		copies bool
	}{
		{name: "identical", copies: true},
		{name: "labelled apart", copies: true, node: func(i int, node *v1.Node, _ *resourceapi.ResourceSlice) {
			if i%4 == 1 {
				node.Labels["zone"] = "b"
			}
		}},
		{name: "tainted", copies: true, after: func(eng *placement.Engine) {
			// Tainted once its pods run, as a node being cordoned is.
			for _, name := range []string{"node-00009", "node-00010"} {
				node := eng.Snapshot().NodeInfo(name).Node()
				node.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
			}
		}},
		{name: "fewer devices", copies: true, node: func(i int, _ *v1.Node, slice *resourceapi.ResourceSlice) {
			if i%3 == 2 {
				slice.Spec.Devices = slice.Spec.Devices[:7]
			}
		}},
		{name: "pool named apart", copies: true, node: func(i int, _ *v1.Node, slice *resourceapi.ResourceSlice) {
			if i == 11 {
				slice.Spec.Pool.Name = "pool-11"
			}
		}},
		{name: "busier", copies: true, after: func(eng *placement.Engine) {
			busy(eng, "node-00010")
			busy(eng, "node-00008")
		}},
		{name: "anti-affinity", after: func(eng *placement.Engine) {
			p := fx.Pod("lonely", 100, nil)
			p.Labels = map[string]string{"app": "lonely"}
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "lonely"}}, TopologyKey: v1.LabelHostname}}}}
			if _, ferr := eng.Place(p, "node-00005"); ferr != nil {
				t.Fatal(ferr)
			}
		}},
		{name: "shared slice", after: func(eng *placement.Engine) {
			// Devices of another driver, which no pod asks for.
			s := fx.DeviceSlice("shared", "other.example.com", 2, "spare")
			s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
			if err := eng.Snapshot().AddResourceSlice(s); err != nil {
				t.Fatal(err)
			}
		}},
		// A pool of all nodes the pods take from: a drain frees its
		// devices, so targets that rejected a kind may take it again.
		{name: "shared pool", after: func(eng *placement.Engine) {
			s := fx.DeviceSlice("shared", fx.Driver, 2, "spare")
			s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
			if err := eng.Snapshot().AddResourceSlice(s); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		for _, generated := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/generated=%t", c.name, generated), func(t *testing.T) {
				var used *placement.StateCopies
				withCopies := Options{UtilizationThreshold: 0.5, stateCopies: func(eng *placement.Engine) *placement.StateCopies {
					used = eng.NewStateCopies()
					return used
				}}
				removals, rejections := Find(copyCluster(t, 12, generated, c.node, c.after), withCopies)
				withoutCopies := Options{UtilizationThreshold: 0.5, stateCopies: func(*placement.Engine) *placement.StateCopies { return nil }}
				slowRemovals, slowRejections := Find(copyCluster(t, 12, generated, c.node, c.after), withoutCopies)
				if !reflect.DeepEqual(removals, slowRemovals) {
					t.Errorf("removals with copies %+v, without %+v", removals, slowRemovals)
				}
				if !reflect.DeepEqual(rejections, slowRejections) {
					t.Errorf("rejections with copies %+v, without %+v", rejections, slowRejections)
				}
				if len(removals) == 0 {
					t.Errorf("nothing removed: the case moves no pod")
				}
				if got := used != nil && used.Copied() > 0; got != c.copies {
					t.Errorf("placements copied: %t, want %t", got, c.copies)
				}
			})
		}
	}
}

// Pods leaving one by one where they are not independent (two pods share
// a claim: the first cannot leave the node while the second holds it)
// would move otherwise than all leaving first; with the switch the
// difference stops the process.
func TestVerifyShortcutsCatchesPodsLeavingOneByOneThatShare(t *testing.T) {
	t.Setenv(placement.VerifyShortcutsEnv, "1")
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"busy", "light"} {
		if err := snap.AddNode(fx.Node(node, 64, 256, nil)); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(node, 8)); err != nil {
			t.Fatal(err)
		}
	}
	snap.SetResourceClaim(fx.Claim("shared", "gpu.example.com", 1))
	var uids []types.UID
	for _, name := range []string{"a", "b"} {
		placed, ferr := eng.Place(fx.WithClaim(fx.Pod(name, 100, nil), "gpu", "shared"), "light")
		if ferr != nil {
			t.Fatal(ferr)
		}
		uids = append(uids, placed.UID)
	}
	d := newDrainer(eng, Options{}, []string{"busy", "light"})
	if d.independent(uids) {
		t.Fatal("pods sharing a claim are independent")
	}
	defer func() {
		if r := fmt.Sprint(recover()); !strings.Contains(r, "the drain one by one shortcut differs") {
			t.Errorf("recovered %q, want the drain one by one difference", r)
		}
	}()
	d.verifyOneByOne("light", uids, 1)
}

// A running pod's required anti-affinity across a zone keeps a kind off
// every node of the zone; once that pod has moved to another zone, the
// zone's targets take the kind again, so what they rejected is dropped:
// k-0 (drained first) finds t1 rejecting it while y runs in zone a; y
// then moves to zone b, and d3's pods go to t1, the first target, as the
// scheduler's plugins place them (held by the switch).
func TestFindForgetsRejectionsWhenAnAntiAffinityPodLeaves(t *testing.T) {
	t.Setenv(placement.VerifyShortcutsEnv, "1")
	snap := snapshot.New()
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range [][2]string{{"t1", "a"}, {"t3", "c"}, {"t2", "b"}, {"d1", "a"}, {"d2", "e"}, {"d3", "d"}} {
		node := fx.Node(n[0], 10, 64, nil)
		node.Labels["zone"] = n[1]
		if err := snap.AddNode(node); err != nil {
			t.Fatal(err)
		}
	}
	place := func(p *v1.Pod, node string) {
		if _, ferr := eng.Place(p, node); ferr != nil {
			t.Fatal(ferr)
		}
	}
	kind := func(name string) *v1.Pod {
		p := fx.Pod(name, 100, nil)
		p.Labels = map[string]string{"app": "k"}
		return p
	}
	// Targets, none a candidate: t1 has room for 100m pods only.
	place(fx.Pod("busy-1", 9000, nil), "t1")
	place(fx.Pod("busy-3", 5000, nil), "t3")
	place(fx.Pod("busy-2", 5000, nil), "t2")
	y := fx.Pod("y", 2000, nil)
	y.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "k"}}, TopologyKey: "zone"}}}}
	place(y, "d1")
	place(kind("k-0"), "d2")
	for i := range 25 {
		place(kind(fmt.Sprintf("k3-%d", i)), "d3")
	}
	removals, rejections := Find(eng, Options{UtilizationThreshold: 0.5})
	if len(removals) != 3 {
		t.Fatalf("removals %+v, rejections %+v; want d2, d1 and d3 removed", removals, rejections)
	}
	if got := removals[0].Moves["default/k-0"]; got != "t3" {
		t.Errorf("k-0 moved to %s, want t3 (t1's zone holds y)", got)
	}
	if got := removals[1].Moves["default/y"]; got != "t2" {
		t.Errorf("y moved to %s, want t2", got)
	}
	if got := removals[2].Moves["default/k3-0"]; got != "t1" {
		t.Errorf("k3-0 moved to %s, want t1, free of y now", got)
	}
}
