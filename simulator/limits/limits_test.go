package limits

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"draxr.dev/draxr/simulator/dynres"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// --gpu-total counts GPUs: a DynamicMIG H100 node is 8 whether the limit
// names the whole-GPU class or the MIG class (152 MIG and GPU devices
// published); static MIG devices are plain devices and count as such.
func TestGPUTotalCountsHardware(t *testing.T) {
	snap := snapshot.New()
	for _, c := range fx.NVIDIAClasses() {
		snap.SetDeviceClass(c)
	}
	add := func(name string, slices ...*resourceapi.ResourceSlice) {
		if err := snap.AddNode(fx.H100Node(name)); err != nil {
			t.Fatal(err)
		}
		for _, s := range slices {
			if err := snap.AddResourceSlice(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("dynamic", fx.NVIDIADynamicMIG("dynamic", 8)...)
	add("static", fx.NVIDIAStaticMIG("static", 8, "3g.40gb", "3g.40gb"))
	l := Limits{GPUs: []GPULimit{
		{Type: "deviceclass.resource.kubernetes.io/gpu.nvidia.com", Range: Range{Max: 64}},
		{Type: "deviceclass.resource.kubernetes.io/mig.nvidia.com", Range: Range{Max: 64}},
	}}
	m := dynres.NewMatcher()
	for node, want := range map[string][2]int64{"dynamic": {8, 8}, "static": {0, 16}} {
		a := l.Of(snap.NodeInfo(node).Node(), m.ForNode(snap, node))
		if got := [2]int64{a["deviceclass.resource.kubernetes.io/gpu.nvidia.com"], a["deviceclass.resource.kubernetes.io/mig.nvidia.com"]}; got != want {
			t.Errorf("%s node counts (gpu, mig) %v, want %v", node, got, want)
		}
	}
}
