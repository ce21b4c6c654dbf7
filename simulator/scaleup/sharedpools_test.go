package scaleup

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// A pod waiting for a device of a used-up shared pool is told which pool.
func TestReasonNamesExhaustedSharedPool(t *testing.T) {
	snap := snapshot.New()
	if err := snap.AddNode(fx.Node("n0", 64, 256, nil)); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddResourceSlice(fabricSlice(2)); err != nil {
		t.Fatal(err)
	}
	snap.SetDeviceClass(fx.Class("fabric.example.com", "fabric.example.com", "example.com/link", fx.Epoch))
	cpuGroup := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: nodegroup.Spec{MinSize: 0, MaxSize: 5, Template: *fx.Node("template", 64, 256, nil)}}
	p := newPlanner(t, snap, cpuGroup)
	link := fx.GPUs("example.com/link", 1)
	for _, name := range []string{"a", "b"} { // take both devices
		if _, ferr := p.Engine.Place(fx.Pod(name, 100, link), "n0"); ferr != nil {
			t.Fatal(ferr)
		}
	}
	plan, err := p.Plan(replicas("waiting", 1, 100, link))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 0 || len(plan.NoScaleUp) != 1 {
		t.Fatalf("plan %+v / %+v, want no scale-up and one pod explained", plan.ScaleUps, plan.NoScaleUp)
	}
	want := "shared pool fabric-a of driver fabric.example.com has no free device (all 2 it could use are allocated)"
	if c := plan.NoScaleUp[0].Code; c != SharedPoolExhausted {
		t.Errorf("code %s, want %s", c, SharedPoolExhausted)
	}
	if r := plan.NoScaleUp[0].Reason; !strings.Contains(r, want) {
		t.Errorf("reason %q, want it to contain %q", r, want)
	}
}

// Pods alike (one GPU and a link each, from templates) fill a new node,
// but the links come from a shared pool of 3: a fourth pod finds none on
// the next node, so the plan is one node for 3 of 5, the others told
// why. Copying the first node's placements to the next (as for devices
// of the node's own) would hand out the same link twice.
func TestSharedPoolPlacementsAreNotCopied(t *testing.T) {
	snap := snapshot.New()
	if err := snap.AddResourceSlice(fabricSlice(3)); err != nil {
		t.Fatal(err)
	}
	snap.SetDeviceClass(fx.Class("fabric.example.com", "fabric.example.com", "", fx.Epoch))
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("link", "fabric.example.com", 1))
	p := newPlanner(t, snap, draGroup("gpu", 1, 8))
	pods := replicas("job", 5, 100, fx.GPUs(fx.GPUResource, 1))
	for _, pod := range pods {
		fx.WithTemplateClaim(pod, "link", "link")
	}
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for _, su := range plan.ScaleUps {
		placed += len(su.Pods)
	}
	links := map[string]bool{}
	for _, su := range plan.ScaleUps {
		for _, pl := range su.Placements {
			for _, d := range pl.Devices {
				if strings.HasPrefix(d, "fabric.example.com/") {
					if links[d] {
						t.Errorf("link %s handed out twice", d)
					}
					links[d] = true
				}
			}
		}
	}
	if placed != 3 || len(plan.NoScaleUp) != 2 || len(links) != 3 {
		t.Fatalf("plan places %d pods with %d links, %d without; want 3 pods, 3 links, 2 told why: %+v", placed, len(links), len(plan.NoScaleUp), plan.ScaleUps)
	}
	for _, n := range plan.NoScaleUp {
		if n.Code != SharedPoolExhausted {
			t.Errorf("pod %s: %s %q, want %s", n.Pod, n.Code, n.Reason, SharedPoolExhausted)
		}
	}
}

// fabricSlice is a pool for all nodes (fabric-a) of n links.
func fabricSlice(n int) *resourceapi.ResourceSlice {
	shared := fx.DeviceSlice("x", "fabric.example.com", n, "link")
	shared.Name = "fabric-slice"
	shared.Spec.NodeName = nil
	shared.Spec.AllNodes = ptr.To(true)
	shared.Spec.Pool.Name = "fabric-a"
	return shared
}
