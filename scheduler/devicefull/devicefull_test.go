package devicefull_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/scheduler/devicefull"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// Which nodes the fast verdict rejects, per pod: only nodes with no
// device left, only for pods that need one, and nothing at all where the
// verdict would depend on more than free devices.
func TestDeviceFullRejects(t *testing.T) {
	const class = "gpu.example.com"
	adminClaim := fx.Claim("admin", class, 1)
	adminClaim.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	allMode := fx.Claim("all", class, 0)
	allMode.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	withXRClaim := fx.Pod("retry", 500, fx.GPUs(fx.GPUResource, 1))
	prior := fx.ExtendedResourceClaim(withXRClaim, class, fx.Driver, "free", 0)
	prior.Status.Allocation = nil

	tests := []struct {
		name   string
		pod    *v1.Pod
		claims []*resourceapi.ResourceClaim
		shared bool // a slice not local to one node
		// rejected nodes; nil: no fast verdict for the pod at all
		want []string
	}{
		{name: "DRA-backed extended resource", pod: fx.Pod("xr", 500, fx.GPUs(fx.GPUResource, 1)), want: []string{"cpu", "full"}},
		{name: "own claim", pod: fx.WithClaim(fx.Pod("own", 500, nil), "gpu", "one"),
			claims: []*resourceapi.ResourceClaim{fx.Claim("one", class, 1)}, want: []string{"cpu", "full", "plugin"}},
		{name: "CPU only", pod: fx.Pod("cpu", 500, nil)},
		{name: "device-plugin resource only", pod: fx.Pod("fpga", 500, fx.GPUs("example.com/fpga", 1))},
		{name: "claim allocated already", pod: fx.WithClaim(fx.Pod("held", 500, nil), "gpu", "held"),
			claims: []*resourceapi.ResourceClaim{fx.Allocated("held", class, fx.Driver, "free", "gpu-0")}},
		{name: "admin access may share a held device", pod: fx.WithClaim(fx.Pod("admin", 500, nil), "gpu", "admin"),
			claims: []*resourceapi.ResourceClaim{adminClaim}},
		{name: "allocation mode All", pod: fx.WithClaim(fx.Pod("all", 500, nil), "gpu", "all"),
			claims: []*resourceapi.ResourceClaim{allMode}},
		{name: "claim that does not exist", pod: fx.WithClaim(fx.Pod("missing", 500, nil), "gpu", "missing")},
		{name: "extended-resource claim from a prior cycle", pod: withXRClaim, claims: []*resourceapi.ResourceClaim{prior}},
		{name: "a slice shared by nodes", pod: fx.Pod("xr", 500, fx.GPUs(fx.GPUResource, 1)), shared: true},
		{name: "a resource nobody offers: upstream's own reason on nodes lacking it",
			pod: fx.Pod("unknown", 500, v1.ResourceList{fx.GPUResource: fx.Count(1), "example.com/nothing": fx.Count(1)}), want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetDeviceClass(fx.Class(class, fx.Driver, fx.GPUResource, fx.Epoch))
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(snap.AddNode(fx.Node("cpu", 16, 64, nil)))
			must(snap.AddNode(fx.Node("plugin", 16, 64, fx.GPUs(fx.GPUResource, 4))))
			for _, n := range []string{"full", "free"} {
				must(snap.AddNode(fx.Node(n, 16, 64, nil)))
				must(snap.AddResourceSlice(fx.GPUSlice(n, 2)))
			}
			snap.SetResourceClaim(fx.Allocated("taken", class, fx.Driver, "full", "gpu-0", "gpu-1"))
			snap.SetResourceClaim(fx.Allocated("half", class, fx.Driver, "free", "gpu-1"))
			if tt.shared {
				s := fx.DeviceSlice("rack", fx.Driver, 1, "gpu")
				s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
				must(snap.AddResourceSlice(s))
			}
			for _, c := range tt.claims {
				snap.SetResourceClaim(c)
			}
			d := devicefull.For(snap, &devicefull.SliceCache{}, framework.NewCycleState(), tt.pod, 0)
			if tt.want == nil {
				if d != nil {
					t.Fatalf("fast verdict for %s, want none (upstream decides every node)", tt.pod.Name)
				}
				return
			}
			if d == nil {
				t.Fatalf("no fast verdict for %s, want %v rejected", tt.pod.Name, tt.want)
			}
			var got []string
			for _, n := range []string{"cpu", "full", "free", "plugin"} {
				if d.Rejects(snap.NodeInfo(n)) {
					got = append(got, n)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("rejected %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("rejected %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// Below minSlices slices upstream decides every node: its walk is short.
func TestDeviceFullOnlyFromMinSlices(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	for _, n := range []string{"a", "b"} {
		if err := snap.AddNode(fx.Node(n, 16, 64, nil)); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(n, 1)); err != nil {
			t.Fatal(err)
		}
	}
	snap.SetResourceClaim(fx.Allocated("taken", "gpu.example.com", fx.Driver, "a", "gpu-0"))
	pod := fx.Pod("xr", 500, fx.GPUs(fx.GPUResource, 1))
	if d := devicefull.For(snap, &devicefull.SliceCache{}, framework.NewCycleState(), pod, 3); d != nil {
		t.Errorf("verdict with 2 slices and minSlices 3, want none")
	}
	d := devicefull.For(snap, &devicefull.SliceCache{}, framework.NewCycleState(), pod, 2)
	if d == nil || !d.Rejects(snap.NodeInfo("a")) || d.Rejects(snap.NodeInfo("b")) {
		t.Errorf("with 2 slices and minSlices 2, want a verdict rejecting full node a only")
	}
}
