package scaleup

import (
	"strings"
	"testing"

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
	shared := fx.DeviceSlice("x", "fabric.example.com", 2, "link")
	shared.Name = "fabric-slice"
	shared.Spec.NodeName = nil
	shared.Spec.AllNodes = ptr.To(true)
	shared.Spec.Pool.Name = "fabric-a"
	if err := snap.AddResourceSlice(shared); err != nil {
		t.Fatal(err)
	}
	snap.SetDeviceClass(fx.Class("fabric.example.com", "fabric.example.com", "example.com/link", fx.Epoch))
	cpuGroup := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: nodegroup.Spec{MinSize: 0, MaxSize: 5, Template: *fx.Node("template", 64, 256, nil)}}
	p := newPlanner(t, snap, cpuGroup)
	link := fx.GPUs("example.com/link", 1)
	for _, name := range []string{"a", "b"} { // take both devices
		if _, ferr := p.Harness.Place(fx.Pod(name, 100, link), "n0"); ferr != nil {
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
