package capacity_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"draxr.dev/draxr/simulator/capacity"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/dynres"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/snapshot"
)

type node struct {
	n      *v1.Node
	slices []*resourceapi.ResourceSlice
}

func build(t *testing.T, classes []*resourceapi.DeviceClass, nodes []node, claims ...*resourceapi.ResourceClaim) *snapshot.Snapshot {
	t.Helper()
	snap := snapshot.New()
	for _, c := range classes {
		snap.SetDeviceClass(c)
	}
	for _, n := range nodes {
		if err := snap.AddNode(n.n); err != nil {
			t.Fatal(err)
		}
		for _, s := range n.slices {
			if err := snap.AddResourceSlice(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range claims {
		snap.SetResourceClaim(c)
	}
	return snap
}

func row(t *testing.T, rows []capacity.Row, name string) capacity.Row {
	t.Helper()
	for _, r := range rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no row %s in %+v", name, rows)
	return capacity.Row{}
}

func counts(r capacity.Row) string {
	return fmt.Sprintf("%d total, %d allocated, %d free", r.Total, r.Allocated, r.Free)
}

// On a DynamicMIG H100 node where gpu-0 holds a 3g.40gb partition and
// gpu-1 is taken whole, 6 whole GPUs are free, not 7 (gpu-0's whole
// device is still published and unallocated, but its counters are not
// all free); MIG is counted per profile by what still fits.
func TestDynamicMIGCountsGPUs(t *testing.T) {
	snap := build(t, fx.NVIDIAClasses(), []node{{fx.H100Node("h100-a"), fx.NVIDIADynamicMIG("h100-a", 8)}},
		fx.Allocated("mig", "mig.nvidia.com", fx.NVIDIADriver, "h100-a", fx.MIGName(0, "3g.40gb", 4)),
		fx.Allocated("whole", "gpu.nvidia.com", fx.NVIDIADriver, "h100-a", "gpu-1"))
	r := capacity.Compute(snap, dynres.NewMatcher())

	if got := counts(row(t, r.Classes, "gpu.nvidia.com")); got != "8 total, 2 allocated, 6 free" {
		t.Errorf("gpu.nvidia.com: %s, want 8 total, 2 allocated, 6 free", got)
	}
	mig := row(t, r.Classes, "mig.nvidia.com")
	if got := counts(mig); got != "8 total, 2 allocated, 6 free" {
		t.Errorf("mig.nvidia.com (whole GPUs its partitions draw on): %s, want 8 total, 2 allocated, 6 free", got)
	}
	// Free GPUs take 7 1g.10gb each; gpu-0's 3g.40gb at memory slices 4-7
	// leaves slices 0-3 and 72 of 132 SMs: 4 more 1g.10gb, one 3g or 4g.
	want := []devicepools.Partition{
		{Profile: "1g.10gb", Total: 56, Free: 46},
		{Profile: "1g.20gb", Total: 32, Free: 26},
		{Profile: "2g.20gb", Total: 24, Free: 20},
		{Profile: "3g.40gb", Total: 16, Free: 13},
		{Profile: "4g.40gb", Total: 8, Free: 7},
		{Profile: "7g.80gb", Total: 8, Free: 6},
	}
	if fmt.Sprint(mig.Partitions) != fmt.Sprint(want) {
		t.Errorf("MIG partitions:\n got %v\nwant %v", mig.Partitions, want)
	}
	if len(row(t, r.Classes, "gpu.nvidia.com").Partitions) != 0 {
		t.Errorf("gpu.nvidia.com lists partitions; whole GPUs are not partitions")
	}
	got := map[string]string{}
	for _, c := range r.Counters {
		got[c.Counter] = fmt.Sprintf("%s/%s/%s", c.Total.String(), c.Consumed.String(), c.Free.String())
	}
	for counter, want := range map[string]string{
		"multiprocessors": "1056/192/864",
		"memory":          "640Gi/120Gi/520Gi",
		"memory-slice-4":  "8/2/6",
		"memory-slice-0":  "8/1/7",
	} {
		if got[counter] != want {
			t.Errorf("counter %s: total/consumed/free %s, want %s", counter, got[counter], want)
		}
	}

	var buf bytes.Buffer
	if err := report.CapacityTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"mig.nvidia.com  1g.10gb", "gpu.nvidia.com  multiprocessors"} {
		if !strings.Contains(strings.Join(strings.Fields(buf.String()), " "), strings.Join(strings.Fields(line), " ")) {
			t.Errorf("table lacks %q:\n%s", line, buf.String())
		}
	}
}

// Eight H100s all taken whole: nothing free, whatever the 150 MIG devices
// still published say.
func TestDynamicMIGAllWhole(t *testing.T) {
	var gpus []string
	for i := range 8 {
		gpus = append(gpus, fmt.Sprintf("gpu-%d", i))
	}
	snap := build(t, fx.NVIDIAClasses(), []node{{fx.H100Node("h100-a"), fx.NVIDIADynamicMIG("h100-a", 8)}},
		fx.Allocated("all", "gpu.nvidia.com", fx.NVIDIADriver, "h100-a", gpus...))
	r := capacity.Compute(snap, dynres.NewMatcher())
	mig := row(t, r.Classes, "mig.nvidia.com")
	if got := counts(mig); got != "8 total, 8 allocated, 0 free" {
		t.Errorf("mig.nvidia.com: %s", got)
	}
	for _, p := range mig.Partitions {
		if p.Free != 0 {
			t.Errorf("profile %s: %d free on fully used GPUs", p.Profile, p.Free)
		}
	}
}

// Plain pools keep counting devices: static MIG (MIG devices published as
// plain devices), Gaudi 3 and MI300X in CPX mode publish no counters.
func TestPlainPoolsCountDevices(t *testing.T) {
	classes := append(fx.NVIDIAClasses(), fx.DriverClass("gaudi.intel.com"), fx.DriverClass("gpu.amd.com"))
	gaudi := fx.GaudiSlice("gaudi-a", 8)
	snap := build(t, classes, []node{
		{fx.H100Node("mig-a"), []*resourceapi.ResourceSlice{fx.NVIDIAStaticMIG("mig-a", 8, "3g.40gb", "3g.40gb")}},
		{fx.Node("gaudi-a", 160, 1024, nil), []*resourceapi.ResourceSlice{gaudi}},
		{fx.Node("mi300x-a", 128, 2048, nil), []*resourceapi.ResourceSlice{fx.MI300XSlice("mi300x-a", 8, 8)}},
	},
		fx.Allocated("m", "mig.nvidia.com", fx.NVIDIADriver, "mig-a", fx.MIGName(0, "3g.40gb", 0)),
		fx.Allocated("g", "gaudi.intel.com", "gaudi.intel.com", "gaudi-a", gaudi.Spec.Devices[0].Name, gaudi.Spec.Devices[1].Name))
	r := capacity.Compute(snap, dynres.NewMatcher())
	for name, want := range map[string]string{
		"mig.nvidia.com":  "16 total, 1 allocated, 15 free",
		"gaudi.intel.com": "8 total, 2 allocated, 6 free",
		"gpu.amd.com":     "64 total, 0 allocated, 64 free",
	} {
		got := row(t, r.Classes, name)
		if counts(got) != want || len(got.Partitions) != 0 {
			t.Errorf("%s: %s, partitions %v; want %s and none", name, counts(got), got.Partitions, want)
		}
	}
	if len(r.Counters) != 0 {
		t.Errorf("counters from pools without any: %v", r.Counters)
	}
}

// Tainted devices are not free: of 8 Gaudi devices, one allocated, one
// with a NoSchedule taint on the slice, one a DeviceTaintRule NoExecutes
// and one with an informational (None) taint, 5 are free and 2 tainted,
// per node group and in the table.
func TestTaintedDevicesAreNotFree(t *testing.T) {
	gaudi := fx.GaudiSlice("gaudi-a", 8)
	gaudi.Spec.Devices[1].Taints = []resourceapi.DeviceTaint{{Key: "health", Value: "degraded", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	gaudi.Spec.Devices[3].Taints = []resourceapi.DeviceTaint{{Key: "note", Effect: resourceapi.DeviceTaintEffectNone}}
	driver := "gaudi.intel.com"
	snap := snapshot.New()
	snap.SetDeviceClass(fx.DriverClass(driver))
	snap.SetDeviceTaintRules([]*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: &driver, Device: &gaudi.Spec.Devices[2].Name},
		Taint:          resourceapi.DeviceTaint{Key: "maintenance", Effect: resourceapi.DeviceTaintEffectNoExecute},
	}}})
	n := fx.Node("gaudi-a", 160, 1024, nil)
	n.Labels = map[string]string{nodegroup.GroupLabel: "gaudi"}
	if err := snap.AddNode(n); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddResourceSlice(gaudi); err != nil {
		t.Fatal(err)
	}
	snap.SetResourceClaim(fx.Allocated("g", driver, driver, "gaudi-a", gaudi.Spec.Devices[0].Name))

	r := capacity.Compute(snap, dynres.NewMatcher())
	got := row(t, r.Classes, driver)
	if counts(got) != "8 total, 1 allocated, 5 free" || got.Tainted != 2 {
		t.Errorf("%s: %s, %d tainted; want 8 total, 1 allocated, 5 free, 2 tainted", driver, counts(got), got.Tainted)
	}
	if len(got.Groups) != 1 || got.Groups[0].Name != "gaudi" || got.Groups[0].Tainted != 2 || got.Groups[0].Free != 5 {
		t.Errorf("by group: %+v", got.Groups)
	}
	var buf bytes.Buffer
	if err := report.CapacityTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(buf.String()), " "), "gaudi.intel.com 8 1 5 2") {
		t.Errorf("table lacks total/allocated/free/tainted 8 1 5 2:\n%s", buf.String())
	}
}

// A DynamicMIG GPU whose every device (whole and MIG placements) is
// tainted NoExecute is tainted hardware, not free; one with only some
// placements tainted is still free (its untainted devices can take it).
func TestTaintedPartitionedGPUsAreNotFree(t *testing.T) {
	slices := fx.NVIDIADynamicMIG("h100-a", 8)
	setOf := func(device string) string {
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				if d.Name == device && len(d.ConsumesCounters) > 0 {
					return d.ConsumesCounters[0].CounterSet
				}
			}
		}
		t.Fatalf("no device %s drawing on a counter set", device)
		return ""
	}
	all, some := setOf("gpu-3"), setOf("gpu-5")
	taint := []resourceapi.DeviceTaint{{Key: "xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoExecute}}
	first := true
	for _, s := range slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			for _, c := range d.ConsumesCounters {
				if c.CounterSet == all || (c.CounterSet == some && first && d.Name != "gpu-5") {
					if c.CounterSet == some {
						first = false
					}
					d.Taints = taint
				}
			}
		}
	}
	snap := build(t, fx.NVIDIAClasses(), []node{{fx.H100Node("h100-a"), slices}},
		fx.Allocated("whole", "gpu.nvidia.com", fx.NVIDIADriver, "h100-a", "gpu-1"))
	r := capacity.Compute(snap, dynres.NewMatcher())
	for _, class := range []string{"gpu.nvidia.com", "mig.nvidia.com"} {
		got := row(t, r.Classes, class)
		if counts(got) != "8 total, 1 allocated, 6 free" || got.Tainted != 1 {
			t.Errorf("%s: %s, %d tainted; want 8 total, 1 allocated, 6 free, 1 tainted (gpu-3)", class, counts(got), got.Tainted)
		}
	}
}
