package devicepools

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

const (
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
)

// counters is one counter "memory" of n.
func counters(n int64) map[string]resourceapi.Counter {
	return map[string]resourceapi.Counter{"memory": {Value: *resource.NewQuantity(n, resource.DecimalSI)}}
}

// partition is a device drawing n of set's memory, with a profile
// attribute when profile is not "".
func partition(name, set string, n int64, profile string) resourceapi.Device {
	d := resourceapi.Device{Name: name, ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: counters(n)}}}
	if profile != "" {
		d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"profile": {StringValue: ptr.To(profile)}}
	}
	return d
}

// gpuSlices are node n0's GPU pool, one GPU of 8 memory units published
// as the whole GPU and as two halves (profile 4g), and a NIC pool of two
// plain devices.
func gpuSlices() []*resourceapi.ResourceSlice {
	gpu := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n0-gpu"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: gpuDriver, NodeName: ptr.To("n0"), Pool: resourceapi.ResourcePool{Name: "n0", ResourceSliceCount: 1},
		SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0-set", Counters: counters(8)}},
		Devices: []resourceapi.Device{partition("gpu-0", "gpu-0-set", 8, ""), partition("gpu-0-half-0", "gpu-0-set", 4, "4g"),
			partition("gpu-0-half-1", "gpu-0-set", 4, "4g")},
	}}
	nic := fx.DeviceSlice("n0", nicDriver, 2, "nic")
	return []*resourceapi.ResourceSlice{gpu, nic}
}

// usage is node n0 with gpuSlices and claims holding the named devices
// (driver/device).
func usage(t *testing.T, held ...string) snapshot.DeviceUsage {
	t.Helper()
	snap := snapshot.New()
	if err := snap.AddNode(fx.Node("n0", 8, 32, nil)); err != nil {
		t.Fatal(err)
	}
	for _, s := range gpuSlices() {
		if err := snap.AddResourceSlice(s); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range held {
		driver, device := gpuDriver, h
		if _, err := fmt.Sscanf(h, nicDriver+"/%s", &device); err == nil {
			driver = nicDriver
		}
		snap.SetResourceClaim(fx.Allocated(fmt.Sprintf("c%d", i), "any", driver, "n0", device))
	}
	return snap.DeviceUsage()
}

// What a node's pools are used for, as a person counting the hardware
// would: a half taken uses half the GPU, the whole one all of it, one of
// two NICs half the NICs.
func TestUtilization(t *testing.T) {
	tests := []struct {
		name    string
		held    []string
		gpu     float64
		nic     float64
		nicUsed bool
	}{
		{name: "nothing allocated", gpu: 0, nic: 0},
		{name: "one half of the GPU", held: []string{"gpu-0-half-0"}, gpu: 0.5},
		{name: "both halves", held: []string{"gpu-0-half-0", "gpu-0-half-1"}, gpu: 1},
		{name: "the whole GPU", held: []string{"gpu-0"}, gpu: 1},
		{name: "one NIC of two", held: []string{nicDriver + "/nic-1"}, nic: 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools := Pools(gpuSlices(), usage(t, tt.held...))
			if len(pools) != 2 || pools[0].Driver != gpuDriver || pools[1].Driver != nicDriver {
				t.Fatalf("pools %v, want the GPU pool then the NIC pool", poolNames(pools))
			}
			if u, ok := pools[0].Utilization(); !ok || u != tt.gpu {
				t.Errorf("GPU utilization %v (ok %v), want %v", u, ok, tt.gpu)
			}
			if u, ok := pools[1].Utilization(); !ok || u != tt.nic {
				t.Errorf("NIC utilization %v (ok %v), want %v", u, ok, tt.nic)
			}
		})
	}
}

func poolNames(pools []*Pool) []string {
	out := make([]string, len(pools))
	for i, p := range pools {
		out[i] = p.Driver + "/" + p.Name
	}
	return out
}

// A pool republished under a new generation is read as its newest slices
// (as the allocator does); counter sets may come in another slice of the
// pool than its devices; a pool of counter sets only has no utilization.
func TestPoolsReadAsTheAllocatorDoes(t *testing.T) {
	old := fx.DeviceSlice("n0", gpuDriver, 4, "old")
	newer := fx.DeviceSlice("n0", gpuDriver, 2, "new")
	newer.Spec.Pool.Generation = 1
	sets := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: ptr.To("n0"),
		Pool: resourceapi.ResourcePool{Name: "n0"}, SharedCounters: []resourceapi.CounterSet{{Name: "s", Counters: counters(2)}}}}
	devices := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: nicDriver, NodeName: ptr.To("n0"),
		Pool: resourceapi.ResourcePool{Name: "n0"}, Devices: []resourceapi.Device{partition("p", "s", 1, "")}}}
	tests := []struct {
		name        string
		slices      []*resourceapi.ResourceSlice
		devices     []string // per pool, in pool order
		partitioned []bool
		utilized    []bool // Utilization's ok
	}{
		{name: "newest generation", slices: []*resourceapi.ResourceSlice{old, newer},
			devices: []string{"new-0,new-1"}, partitioned: []bool{false}, utilized: []bool{true}},
		{name: "counter sets in another slice", slices: []*resourceapi.ResourceSlice{sets, devices},
			devices: []string{"p"}, partitioned: []bool{true}, utilized: []bool{true}},
		{name: "counter sets only", slices: []*resourceapi.ResourceSlice{sets},
			devices: []string{""}, partitioned: []bool{true}, utilized: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pools := Pools(tt.slices, snapshot.DeviceUsage{})
			if len(pools) != len(tt.devices) {
				t.Fatalf("pools %v, want %d", poolNames(pools), len(tt.devices))
			}
			for i, p := range pools {
				var names []string
				for _, d := range p.Devices {
					names = append(names, d.Name)
				}
				if got := strings.Join(names, ","); got != tt.devices[i] {
					t.Errorf("pool %s devices %q, want %q", p.Name, got, tt.devices[i])
				}
				if p.Partitioned() != tt.partitioned[i] {
					t.Errorf("pool %s partitioned %v, want %v", p.Name, p.Partitioned(), tt.partitioned[i])
				}
				if _, ok := p.Utilization(); ok != tt.utilized[i] {
					t.Errorf("pool %s utilization ok %v, want %v", p.Name, ok, tt.utilized[i])
				}
			}
		})
	}
}

// The hardware behind a partitioned class: one GPU, free only while no
// partition of it is taken, and how many halves and whole GPUs fit at
// most and on what is left. Plain devices are not hardware to count.
func TestHardwareOf(t *testing.T) {
	gpus := func(driver string, _ *resourceapi.Device) bool { return driver == gpuDriver }
	nics := func(driver string, _ *resourceapi.Device) bool { return driver == nicDriver }
	tests := []struct {
		name    string
		held    []string
		matches func(string, *resourceapi.Device) bool
		want    *Hardware
	}{
		{name: "nothing allocated", matches: gpus, want: &Hardware{Units: 1, Free: 1,
			Partitions: []Partition{{Profile: WholeProfile, Total: 1, Free: 1}, {Profile: "4g", Total: 2, Free: 2}}}},
		{name: "one half taken", held: []string{"gpu-0-half-0"}, matches: gpus, want: &Hardware{Units: 1, Free: 0,
			Partitions: []Partition{{Profile: WholeProfile, Total: 1, Free: 0}, {Profile: "4g", Total: 2, Free: 1}}}},
		{name: "the whole GPU taken", held: []string{"gpu-0"}, matches: gpus, want: &Hardware{Units: 1, Free: 0,
			Partitions: []Partition{{Profile: WholeProfile, Total: 1, Free: 0}, {Profile: "4g", Total: 2, Free: 0}}}},
		{name: "plain devices", matches: nics, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HardwareOf(Pools(gpuSlices(), usage(t, tt.held...)), tt.matches)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("HardwareOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Counters totals each driver's counters over its sets: capacity,
// consumed by allocated devices, and free.
func TestCounters(t *testing.T) {
	tests := []struct {
		name                  string
		held                  []string
		total, consumed, free int64
	}{
		{name: "nothing allocated", total: 8, consumed: 0, free: 8},
		{name: "one half taken", held: []string{"gpu-0-half-1"}, total: 8, consumed: 4, free: 4},
		{name: "the whole GPU taken", held: []string{"gpu-0"}, total: 8, consumed: 8, free: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Counters(Pools(gpuSlices(), usage(t, tt.held...)))
			if len(got) != 1 || got[0].Driver != gpuDriver || got[0].Counter != "memory" {
				t.Fatalf("counters %+v, want the GPU pool's memory only", got)
			}
			c := got[0]
			if c.Total.Value() != tt.total || c.Consumed.Value() != tt.consumed || c.Free.Value() != tt.free {
				t.Errorf("memory total %s consumed %s free %s, want %d, %d, %d", &c.Total, &c.Consumed, &c.Free, tt.total, tt.consumed, tt.free)
			}
		})
	}
}

// What a counter set has left takes a device only while every counter it
// draws on holds enough; an undeclared set or counter never fits.
func TestRemainingFits(t *testing.T) {
	tests := []struct {
		name   string
		held   []string
		empty  bool
		device resourceapi.Device
		want   bool
	}{
		{name: "a half on a free GPU", device: partition("x", "gpu-0-set", 4, ""), want: true},
		{name: "a half beside a half taken", held: []string{"gpu-0-half-0"}, device: partition("x", "gpu-0-set", 4, ""), want: true},
		{name: "the whole beside a half taken", held: []string{"gpu-0-half-0"}, device: partition("x", "gpu-0-set", 8, ""), want: false},
		{name: "the whole as if nothing were taken", held: []string{"gpu-0-half-0"}, empty: true, device: partition("x", "gpu-0-set", 8, ""), want: true},
		{name: "an undeclared set", device: partition("x", "other-set", 1, ""), want: false},
		{name: "an undeclared counter", device: resourceapi.Device{Name: "x", ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
			CounterSet: "gpu-0-set", Counters: map[string]resourceapi.Counter{"cores": {Value: resource.MustParse("1")}}}}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpu := Pools(gpuSlices(), usage(t, tt.held...))[0]
			if got := gpu.Remaining(tt.empty).Fits(&tt.device); got != tt.want {
				t.Errorf("Fits = %v, want %v", got, tt.want)
			}
		})
	}
}

// A partition's profile: the driver's attribute, else its capacity, else
// its name.
func TestProfileOf(t *testing.T) {
	tests := []struct {
		name   string
		device resourceapi.Device
		want   string
	}{
		{name: "NVIDIA's profile attribute", device: resourceapi.Device{Name: "d", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"gpu.nvidia.com/profile": {StringValue: ptr.To("1g.10gb")}}}, want: "1g.10gb"},
		{name: "AMD's partitionProfile attribute", device: resourceapi.Device{Name: "d", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"partitionProfile": {StringValue: ptr.To("cpx")}}}, want: "cpx"},
		{name: "capacity", device: resourceapi.Device{Name: "d", Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse("40Gi")}, "cores": {Value: resource.MustParse("2")}}}, want: "cores=2,memory=40Gi"},
		{name: "name", device: resourceapi.Device{Name: "d"}, want: "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ProfileOf(&tt.device); got != tt.want {
				t.Errorf("ProfileOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// A device without taints, or with only informational ones, is open to
// every claim.
func TestKeepsOut(t *testing.T) {
	tests := []struct {
		name   string
		taints []resourceapi.DeviceTaint
		want   bool
	}{
		{name: "no taints", want: false},
		{name: "effect None", taints: []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNone}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeepsOut(tt.taints); got != tt.want {
				t.Errorf("KeepsOut = %v, want %v", got, tt.want)
			}
		})
	}
}

// A device carrying nodeAllocatableResources is named with them, sorted.
func TestNodeAllocatableDevices(t *testing.T) {
	spec := &resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{
		{Name: "plain"},
		{Name: "numa-0", NodeAllocatableResources: map[v1.ResourceName]resourceapi.NodeAllocatableResource{
			v1.ResourceMemory: {}, v1.ResourceCPU: {}}},
	}}
	if got := NodeAllocatableDevices(spec); !reflect.DeepEqual(got, []string{"numa-0 (cpu, memory)"}) {
		t.Errorf("NodeAllocatableDevices = %q, want numa-0 with cpu and memory", got)
	}
}
