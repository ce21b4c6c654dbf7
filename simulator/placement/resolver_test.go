package placement

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// TestClassTieBreakPlacement: two classes map example.com/gpu and select
// different drivers; pods asking for the name land on the winner's devices,
// pods asking for a class's implicit name on that class's devices.
func TestClassTieBreakPlacement(t *testing.T) {
	const (
		driverA = "a.example.com"
		driverB = "b.example.com"
	)
	older, newer := fx.Epoch, fx.Epoch.Add(time.Hour)
	implicit := func(class string) v1.ResourceName {
		return v1.ResourceName("deviceclass.resource.kubernetes.io/" + class)
	}
	cleared := func(c *resourceapi.DeviceClass) *resourceapi.DeviceClass {
		c.Spec.ExtendedResourceName = nil
		return c
	}
	tests := []struct {
		name    string
		classes []*resourceapi.DeviceClass // set in order
		change  func(s *snapshot.Snapshot) // applied after the classes
		ask     v1.ResourceName
		want    string // driver of the devices the pod gets; "" for no fit
	}{
		{
			name:    "newest class wins the name",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			ask:     fx.GPUResource, want: driverB,
		},
		{
			name:    "newest class wins the name, added first",
			classes: []*resourceapi.DeviceClass{fx.Class("class-b", driverB, fx.GPUResource, newer), fx.Class("class-a", driverA, fx.GPUResource, older)},
			ask:     fx.GPUResource, want: driverB,
		},
		{
			name:    "tie: lexicographically first class wins",
			classes: []*resourceapi.DeviceClass{fx.Class("class-b", driverB, fx.GPUResource, older), fx.Class("class-a", driverA, fx.GPUResource, older)},
			ask:     fx.GPUResource, want: driverA,
		},
		{
			name:    "loser keeps its implicit name",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			ask:     implicit("class-a"), want: driverA,
		},
		{
			name:    "winner's implicit name",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			ask:     implicit("class-b"), want: driverB,
		},
		{
			name:    "winner deleted: the other takes over",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change:  func(s *snapshot.Snapshot) { s.DeleteDeviceClass("class-b") },
			ask:     fx.GPUResource, want: driverA,
		},
		{
			name:    "loser deleted: winner stays",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change:  func(s *snapshot.Snapshot) { s.DeleteDeviceClass("class-a") },
			ask:     fx.GPUResource, want: driverB,
		},
		{
			name:    "winner's field cleared: the other takes over",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change: func(s *snapshot.Snapshot) {
				s.SetDeviceClass(cleared(fx.Class("class-b", driverB, fx.GPUResource, newer)))
			},
			ask: fx.GPUResource, want: driverA,
		},
		{
			name:    "winner's field cleared: it keeps its implicit name",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change: func(s *snapshot.Snapshot) {
				s.SetDeviceClass(cleared(fx.Class("class-b", driverB, fx.GPUResource, newer)))
			},
			ask: implicit("class-b"), want: driverB,
		},
		{
			name:    "loser's field cleared: winner stays",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change: func(s *snapshot.Snapshot) {
				s.SetDeviceClass(cleared(fx.Class("class-a", driverA, fx.GPUResource, older)))
			},
			ask: fx.GPUResource, want: driverB,
		},
		{
			name:    "winner deleted and re-added",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change: func(s *snapshot.Snapshot) {
				s.DeleteDeviceClass("class-b")
				s.SetDeviceClass(fx.Class("class-b", driverB, fx.GPUResource, newer))
			},
			ask: fx.GPUResource, want: driverB,
		},
		{
			name:    "deletion reverted",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change: func(s *snapshot.Snapshot) {
				s.Fork()
				s.DeleteDeviceClass("class-b")
				s.Revert()
			},
			ask: fx.GPUResource, want: driverB,
		},
		{
			name:    "deleted class's implicit name is gone",
			classes: []*resourceapi.DeviceClass{fx.Class("class-a", driverA, fx.GPUResource, older), fx.Class("class-b", driverB, fx.GPUResource, newer)},
			change:  func(s *snapshot.Snapshot) { s.DeleteDeviceClass("class-a") },
			ask:     implicit("class-a"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			for _, c := range tc.classes {
				snap.SetDeviceClass(c)
			}
			addNode(t, snap, "node-0", nil, fx.DeviceSlice("node-0", driverA, 2, "a"), fx.DeviceSlice("node-0", driverB, 2, "b"))
			if tc.change != nil {
				tc.change(snap)
			}
			h := newEngine(t, snap)

			placed, ferr := h.Place(fx.Pod("p", 100, fx.GPUs(tc.ask, 2)), "node-0")
			if tc.want == "" {
				wantErrContains(t, ferr, "Insufficient "+string(tc.ask))
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			devs := deviceNames(extendedClaim(h, placed))
			if len(devs) != 2 {
				t.Fatalf("devices = %v, want 2", devs)
			}
			for _, d := range devs {
				if !strings.HasPrefix(d, tc.want+"/") {
					t.Errorf("got device %s, want one of driver %s", d, tc.want)
				}
			}
		})
	}
}
