package devicepools

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"

	"draxr.dev/draxr/simulator/snapshot"
)

// A pool with shared counters (KEP-4815 partitionable devices) publishes
// one device per way of using the hardware: NVIDIA's DynamicMIG driver
// lists per GPU the whole GPU and every MIG placement (26 devices for one
// H100), all drawing on one counter set, "gpu-N-counter-set". Counting
// those devices counts ways, not GPUs; the hardware is the counter set.
// This file counts it: a counter set none of whose counters is consumed
// is a free whole device, one partly consumed is in use.

// Pool is one driver's pool as a node's current-generation slices
// publish it (its counter sets may be in another slice than its devices).
type Pool struct {
	Driver, Name string
	Devices      []PoolDevice
	// Sets are the declared counter sets by name, with what the pool's
	// allocated devices consume from them.
	Sets map[string]*CounterSet
}

// PoolDevice is a device of a pool and what claims take of it.
type PoolDevice struct {
	*resourceapi.Device
	// Allocated: a claim holds it whole, or it has shares (KEP-5075).
	Allocated bool
	// Use is how much of it claims take, 0 to 1 (snapshot.DeviceUsage.Of);
	// Shares counts its shares.
	Use    float64
	Shares int
}

// CounterSet is one shared counter set: its capacity and what allocated
// devices consume from it.
type CounterSet struct {
	Name     string
	Capacity map[string]resource.Quantity
	Consumed map[string]resource.Quantity
}

// Unused reports whether no allocated device consumes from the set: the
// whole device it stands for is free.
func (s *CounterSet) Unused() bool {
	for _, q := range s.Consumed {
		if !q.IsZero() {
			return false
		}
	}
	return true
}

// Partitioned reports whether the pool declares shared counters.
func (p *Pool) Partitioned() bool { return len(p.Sets) > 0 }

// ForNode groups a node's slices by driver and pool, keeping each
// pool's newest generation as the allocator does, and adds up what its
// allocated devices consume.
func ForNode(snap *snapshot.Snapshot, nodeName string) []*Pool {
	return Pools(snap.SlicesForNode(nodeName), snap.DeviceUsage())
}

// Pools is PoolsForNode on given slices and device usage (the zero
// DeviceUsage: nothing allocated).
func Pools(slices []*resourceapi.ResourceSlice, usage snapshot.DeviceUsage) []*Pool {
	type key struct{ driver, pool string }
	newest := map[key]int64{}
	for _, s := range slices {
		k := key{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	byKey := map[key]*Pool{}
	var out []*Pool
	for _, s := range slices {
		k := key{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation != newest[k] {
			continue
		}
		p := byKey[k]
		if p == nil {
			p = &Pool{Driver: k.driver, Name: k.pool, Sets: map[string]*CounterSet{}}
			byKey[k] = p
			out = append(out, p)
		}
		for _, cs := range s.Spec.SharedCounters {
			set := &CounterSet{Name: cs.Name, Capacity: map[string]resource.Quantity{}, Consumed: map[string]resource.Quantity{}}
			for name, c := range cs.Counters {
				set.Capacity[name] = c.Value
			}
			p.Sets[cs.Name] = set
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			use, shares := usage.Of(k.driver, k.pool, d)
			p.Devices = append(p.Devices, PoolDevice{Device: d, Allocated: use > 0 || shares > 0, Use: use, Shares: shares})
		}
	}
	for _, p := range out {
		sort.SliceStable(p.Devices, func(i, j int) bool { return p.Devices[i].Name < p.Devices[j].Name })
		for _, d := range p.Devices {
			if !d.Allocated {
				continue
			}
			for _, c := range d.ConsumesCounters {
				set := p.Sets[c.CounterSet]
				if set == nil {
					continue // undeclared: the allocator refuses the pool; doctor reports it
				}
				for name, v := range c.Counters {
					q := set.Consumed[name]
					q.Add(v.Value)
					set.Consumed[name] = q
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Driver != out[j].Driver {
			return out[i].Driver < out[j].Driver
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Utilization is the share of the pool in use. In a partitioned pool it
// is, per counter, what allocated devices consume over the capacity of
// all the pool's sets, the highest counter winning: eight H100s all taken
// whole read 1, one GPU of eight taken whole reads 1/8. Devices that
// consume no counters count as allocated over published, and the higher
// of the two is the pool's; a device allocated several times counts by
// the capacity its shares consume. ok is false for a pool with no devices.
func (p *Pool) Utilization() (u float64, ok bool) {
	var plain int
	var plainUsed float64
	for _, d := range p.Devices {
		if len(d.ConsumesCounters) == 0 {
			plain++
			plainUsed += d.Use
		}
	}
	if plain > 0 {
		u, ok = float64(plainUsed)/float64(plain), true
	}
	capacity, consumed := map[string]float64{}, map[string]float64{}
	for _, s := range p.Sets {
		for name, q := range s.Capacity {
			capacity[name] += q.AsApproximateFloat64()
			c := s.Consumed[name]
			consumed[name] += c.AsApproximateFloat64()
		}
	}
	for name, c := range capacity {
		if c > 0 {
			u, ok = max(u, min(consumed[name]/c, 1)), true
		}
	}
	return u, ok && len(p.Devices) > 0
}

// Remaining is what is left of each counter of each set.
type Remaining map[string]map[string]resource.Quantity

// Remaining is what the pool's counter sets have left (all of them when
// empty: as if nothing were allocated).
func (p *Pool) Remaining(empty bool) Remaining {
	r := Remaining{}
	for name, s := range p.Sets {
		r[name] = map[string]resource.Quantity{}
		for c, q := range s.Capacity {
			left := q.DeepCopy()
			if !empty {
				left.Sub(s.Consumed[c])
			}
			r[name][c] = left
		}
	}
	return r
}

// Fits reports whether a device's consumption fits what is left;
// a device drawing on an undeclared set or counter never fits.
func (r Remaining) Fits(d *resourceapi.Device) bool {
	for _, c := range d.ConsumesCounters {
		set, ok := r[c.CounterSet]
		if !ok {
			return false
		}
		for name, v := range c.Counters {
			left, ok := set[name]
			if !ok || left.Cmp(v.Value) < 0 {
				return false
			}
		}
	}
	return true
}

func (r Remaining) take(d *resourceapi.Device) {
	for _, c := range d.ConsumesCounters {
		for name, v := range c.Counters {
			left := r[c.CounterSet][name]
			left.Sub(v.Value)
			r[c.CounterSet][name] = left
		}
	}
}

// whole reports whether a device consumes all of every counter of the
// sets it draws on: it is the whole hardware, not a partition of it.
func (p *Pool) whole(d *resourceapi.Device) bool {
	for _, c := range d.ConsumesCounters {
		set := p.Sets[c.CounterSet]
		if set == nil {
			return false
		}
		for name, q := range set.Capacity {
			if v, ok := c.Counters[name]; !ok || v.Value.Cmp(q) != 0 {
				return false
			}
		}
	}
	return len(d.ConsumesCounters) > 0
}

// Hardware counts a class's devices in partitioned pools as the hardware
// they share.
type Hardware struct {
	// Units is how many whole devices the class's devices draw on: one per
	// counter set, plus devices that consume no counters.
	Units int64 `json:"wholeDevices"`
	// Free is how many of them are untouched: sets with nothing consumed,
	// counter-less devices not allocated.
	Free int64 `json:"wholeDevicesFree"`
	// Tainted is how many of them are untouched but kept from claims
	// without a toleration: every device of the class that draws on the
	// set (or the counter-less device) has a NoSchedule or NoExecute
	// taint. They are not in Free.
	Tainted int64 `json:"wholeDevicesTainted,omitempty"`
	// Partitions are, per profile of the devices that take part of a set,
	// how many fit at most.
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition counts one profile of partitions: at most how many fit on the
// hardware when nothing is allocated (Total), and on what is left (Free).
// Placements of one profile overlap, so these are fewer than the devices
// published for it.
type Partition struct {
	Profile string `json:"profile"`
	Total   int64  `json:"total"`
	Free    int64  `json:"free"`
}

// WholeProfile names, among partitions, a whole device the driver gives
// no profile.
const WholeProfile = "(whole device)"

func hasProfile(d *resourceapi.Device) bool { return profileAttribute(d) != "" }

func profileAttribute(d *resourceapi.Device) string {
	for _, want := range []string{"profile", "partitionProfile"} {
		for name, a := range d.Attributes {
			n := string(name)
			if (n == want || strings.HasSuffix(n, "/"+want)) && a.StringValue != nil {
				return *a.StringValue
			}
		}
	}
	return ""
}

// ProfileOf names the profile of a partition: the driver's "profile"
// attribute (NVIDIA: 1g.10gb) or "partitionProfile" (AMD), else its
// capacity, else its name.
func ProfileOf(d *resourceapi.Device) string {
	if p := profileAttribute(d); p != "" {
		return p
	}
	if len(d.Capacity) > 0 {
		parts := make([]string, 0, len(d.Capacity))
		for name, c := range d.Capacity {
			parts = append(parts, fmt.Sprintf("%s=%s", name, c.Value.String()))
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	return d.Name
}

// HardwareOf counts the devices of one class in the given pools; nil when
// none of them consumes counters (plain devices count as they are).
func HardwareOf(pools []*Pool, matches func(driver string, d *resourceapi.Device) bool) *Hardware {
	c := hardwareCount{h: &Hardware{}, profiles: map[string]*profileCount{}}
	for _, p := range pools {
		share := c.classDevices(p, matches)
		c.countSets(p, share)
		c.countPartitions(p, share)
	}
	if !c.partitioned {
		return nil
	}
	if !c.anyPart {
		return c.h
	}
	for name, pr := range c.profiles {
		c.h.Partitions = append(c.h.Partitions, Partition{Profile: name, Total: pr.total, Free: pr.free})
	}
	sort.Slice(c.h.Partitions, func(i, j int) bool { return c.h.Partitions[i].Profile < c.h.Partitions[j].Profile })
	return c.h
}

// hardwareCount is HardwareOf's count as it goes through the pools.
type hardwareCount struct {
	h *Hardware
	// anyPart: a class of whole devices only (NVIDIA's gpu.nvidia.com)
	// has no partitions to list; one with partitions lists every profile,
	// the one taking a whole GPU (7g.80gb) too.
	partitioned, anyPart bool
	profiles             map[string]*profileCount
}

type profileCount struct{ total, free int64 }

// poolShare is what a class's devices that consume counters draw on in
// one pool.
type poolShare struct {
	units sets.Set[string]
	// Per counter set, the class's devices drawing on it and how many
	// of them are tainted.
	drawing, tainted map[string]int
	byProfile        map[string][]PoolDevice
	order            []string // profiles, as first seen
}

// classDevices counts the class's plain devices of pool p and gathers
// those that consume counters by set and profile.
func (c *hardwareCount) classDevices(p *Pool, matches func(driver string, d *resourceapi.Device) bool) poolShare {
	share := poolShare{units: sets.New[string](), drawing: map[string]int{}, tainted: map[string]int{},
		byProfile: map[string][]PoolDevice{}}
	for _, d := range p.Devices {
		if !matches(p.Driver, d.Device) {
			continue
		}
		if len(d.ConsumesCounters) == 0 {
			c.h.Units++
			switch {
			case d.Allocated:
			case KeepsOut(d.Taints):
				c.h.Tainted++
			default:
				c.h.Free++
			}
			continue
		}
		c.partitioned = true
		kept := KeepsOut(d.Taints)
		for _, cc := range d.ConsumesCounters {
			share.units.Insert(cc.CounterSet)
			share.drawing[cc.CounterSet]++
			if kept {
				share.tainted[cc.CounterSet]++
			}
		}
		name := ProfileOf(d.Device)
		if p.whole(d.Device) {
			if !hasProfile(d.Device) {
				name = WholeProfile
			}
		} else {
			c.anyPart = true
		}
		if _, ok := share.byProfile[name]; !ok {
			share.order = append(share.order, name)
		}
		share.byProfile[name] = append(share.byProfile[name], d)
	}
	return share
}

// countSets counts each counter set the class draws on as one unit: free
// when unused, tainted when every device of the class on it is.
func (c *hardwareCount) countSets(p *Pool, share poolShare) {
	for set := range share.units {
		c.h.Units++
		if s := p.Sets[set]; s != nil && s.Unused() {
			if share.tainted[set] == share.drawing[set] {
				c.h.Tainted++
			} else {
				c.h.Free++
			}
		}
	}
}

// countPartitions adds, per profile, how many partitions fit in pool p at
// most and on what is left.
func (c *hardwareCount) countPartitions(p *Pool, share poolShare) {
	for _, name := range share.order {
		// Greedy in name order: placements of one profile are aligned,
		// so taking each that still fits packs them as the hardware does.
		empty, left := p.Remaining(true), p.Remaining(false)
		pr := c.profiles[name]
		if pr == nil {
			pr = &profileCount{}
			c.profiles[name] = pr
		}
		for _, d := range share.byProfile[name] {
			if empty.Fits(d.Device) {
				empty.take(d.Device)
				pr.total++
			}
			if !d.Allocated && left.Fits(d.Device) {
				left.take(d.Device)
				pr.free++
			}
		}
	}
}

// CounterUsage totals one counter of one driver across counter sets.
type CounterUsage struct {
	Driver   string            `json:"driver"`
	Counter  string            `json:"counter"`
	Total    resource.Quantity `json:"total"`
	Consumed resource.Quantity `json:"consumed"`
	Free     resource.Quantity `json:"free"`
}

// Counters adds up, per driver and counter name, the counter sets of the
// given pools, sorted by driver then counter.
func Counters(pools []*Pool) []CounterUsage {
	type key struct{ driver, counter string }
	sums := map[key]*CounterUsage{}
	for _, p := range pools {
		for _, s := range p.Sets {
			for name, q := range s.Capacity {
				k := key{p.Driver, name}
				u := sums[k]
				if u == nil {
					u = &CounterUsage{Driver: p.Driver, Counter: name}
					sums[k] = u
				}
				u.Total.Add(q)
				u.Consumed.Add(s.Consumed[name])
			}
		}
	}
	out := make([]CounterUsage, 0, len(sums))
	for _, u := range sums {
		u.Free = u.Total.DeepCopy()
		u.Free.Sub(u.Consumed)
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Driver != out[j].Driver {
			return out[i].Driver < out[j].Driver
		}
		return out[i].Counter < out[j].Counter
	})
	return out
}

// KeepsOut reports whether taints keep a device from claims that do not
// tolerate them (the allocator's rule; effect None only informs, and with
// DRADeviceTaints off the allocator reads no taint).
func KeepsOut(taints []resourceapi.DeviceTaint) bool {
	if len(taints) == 0 || !utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaints) {
		return false
	}
	for _, t := range taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return true
		}
	}
	return false
}
