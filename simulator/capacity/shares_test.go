package capacity_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/estimator"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/snapshot"
)

// A GPU shared by pods (KEP-5075) is as used as the capacity its shares
// take, in every reader: scale-down utilization, draxr capacity, the
// waste least-waste weighs. Three shares of 20Gi of an 80Gi GPU: 75%;
// before, a shared GPU read idle everywhere, and a node running three
// pods on it was drained as empty.
func TestSharesCountedEverywhere(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch))
	if err := snap.AddNode(fx.Node("node-0", 64, 256, nil)); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddResourceSlice(fx.SharedGPUSlice("node-0")); err != nil {
		t.Fatal(err)
	}
	snap.SetResourceClaimTemplate(fx.ShareTemplate("share", "gpu.example.com", "20Gi"))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, ferr := eng.Place(fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("p%d", i), 100, nil), "gpu", "share"), "node-0"); ferr != nil {
			t.Fatal(ferr)
		}
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

	if u, devices := scaledown.UtilizationOf(eng, "node-0", scaledown.UtilizationIgnores{}); !devices || !near(u, 0.75) {
		t.Errorf("scale-down utilization %v (devices %v), want 0.75 by devices", u, devices)
	}
	if u := estimator.NodeUsage(snap, "node-0"); !near(u.Requested.Devices, 0.75) || u.Allocatable.Devices != 1 {
		t.Errorf("least-waste usage %+v, want 0.75 of 1 device", u)
	}
	pools := devicepools.ForNode(snap, "node-0")
	if len(pools) != 1 || len(pools[0].Devices) != 1 || pools[0].Devices[0].Shares != 3 || !pools[0].Devices[0].Allocated {
		t.Fatalf("pools %+v, want one device with 3 shares", pools)
	}
	r := capacity.Compute(snap, dynres.NewMatcher())
	if len(r.SharedDevices) != 1 {
		t.Fatalf("shared devices %+v, want one", r.SharedDevices)
	}
	d := r.SharedDevices[0]
	if d.Node != "node-0" || d.Shares != 3 || !near(d.Use, 0.75) || len(d.Capacity) != 1 ||
		d.Capacity[0] != (capacity.SharedCapacity{Name: "memory", Total: "80Gi", Consumed: "60Gi", Free: "20Gi"}) {
		t.Errorf("shared device %+v, want 3 shares taking 60Gi of 80Gi", d)
	}
	// The whole device is not free: it takes shares, not a whole claim.
	if len(r.Classes) != 1 || r.Classes[0].Free != 0 || r.Classes[0].Allocated != 1 {
		t.Errorf("class row %+v, want the device allocated (in shares), none free", r.Classes)
	}
}
