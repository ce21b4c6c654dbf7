// Package capacity reports, per DeviceClass and per extended resource name
// (explicit and implicit), how many devices the cluster has, how many are
// allocated (extended-resource claims included) and how many are free,
// broken down by node and node group.
//
// Where a class's devices share counters (partitionable devices: NVIDIA's
// DynamicMIG publishes per GPU the whole GPU and every MIG placement),
// the hardware is counted, not the devices: a whole device per counter
// set, free when none of its counters is consumed; per partition profile,
// at most how many fit; and the counters themselves.
package capacity

import (
	"maps"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/scheduler/classes"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// Report is the cluster-wide view.
type Report struct {
	Classes   []Row `json:"deviceClasses"`
	Resources []Row `json:"extendedResources"`
	// Counters total the shared counters of partitioned pools, per driver
	// and counter.
	Counters []devicepools.CounterUsage `json:"counters,omitempty"`
	// SharedDevices are the devices that allow several allocations
	// (KEP-5075): their shares and, per declared capacity, what the shares
	// consume and what is left.
	SharedDevices []SharedDevice `json:"sharedDevices,omitempty"`
}

// SharedDevice is one device allocated in shares.
type SharedDevice struct {
	Node   string `json:"node"`
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	Shares int    `json:"shares"`
	// Use is the largest fraction of a capacity the shares take (1 with
	// shares and no declared capacity).
	Use      float64          `json:"use"`
	Capacity []SharedCapacity `json:"capacity,omitempty"`
}

// SharedCapacity is one declared capacity of a shared device.
type SharedCapacity struct {
	Name     string `json:"name"`
	Total    string `json:"total"`
	Consumed string `json:"consumed"`
	Free     string `json:"free"`
}

// Row totals one class or one resource name. Total, Allocated and Free
// count whole devices: a counter set where the class's devices share
// counters, else a device.
type Row struct {
	Name      string        `json:"name"`
	Source    dynres.Source `json:"source,omitempty"`
	Class     string        `json:"deviceClass,omitempty"`
	Total     int64         `json:"total"`
	Allocated int64         `json:"allocated"`
	Free      int64         `json:"free"`
	// Tainted are neither allocated nor free: a NoSchedule or NoExecute
	// device taint keeps them from claims that do not tolerate it.
	Tainted int64 `json:"tainted"`
	// Partitions are, per profile of the class's partitions, at most how
	// many fit on the hardware (total) and on what is left (free).
	Partitions []devicepools.Partition `json:"partitions,omitempty"`
	Nodes      []Part                  `json:"nodes"`
	Groups     []Part                  `json:"nodeGroups"`
}

// Part is one node's or one node group's share of a row.
type Part struct {
	Name      string `json:"name"`
	Total     int64  `json:"total"`
	Allocated int64  `json:"allocated"`
	Free      int64  `json:"free"`
	Tainted   int64  `json:"tainted"`
}

// Compute builds the report from every node's dynamic resources.
func Compute(snap *snapshot.Snapshot, m *dynres.Matcher) *Report {
	classRows := map[string]*Row{}
	resRows := map[string]*Row{}
	var pools []*devicepools.Pool
	var shared []SharedDevice
	for _, nodeName := range snap.NodeNames() {
		group := nodegroup.Group(snap.NodeInfo(nodeName).Node())
		if group == "" {
			group = "(none)"
		}
		nodePools := devicepools.ForNode(snap, nodeName)
		pools = append(pools, nodePools...)
		shared = appendShared(shared, snap.DeviceUsage(), nodeName, nodePools)
		for _, e := range m.ForNode(snap, nodeName) {
			key := string(e.Resource) + "|" + string(e.Source)
			add(resRows, key, Row{Name: string(e.Resource), Source: e.Source, Class: e.Class}, nodeName, group, e)
			// A class shows under every name it answers to; count it once,
			// under its implicit name, which it always has.
			if e.Source == dynres.DRA && e.Resource == classes.ImplicitName(e.Class) {
				add(classRows, e.Class, Row{Name: e.Class, Source: dynres.DRA}, nodeName, group, e)
			}
		}
	}
	return &Report{Classes: sorted(classRows), Resources: sorted(resRows), Counters: devicepools.Counters(pools),
		SharedDevices: shared}
}

// appendShared adds the node's devices that allow several allocations,
// with what their shares take.
func appendShared(out []SharedDevice, usage snapshot.DeviceUsage, nodeName string, pools []*devicepools.Pool) []SharedDevice {
	for _, p := range pools {
		for _, d := range p.Devices {
			if !ptr.Deref(d.AllowMultipleAllocations, false) {
				continue
			}
			sd := SharedDevice{Node: nodeName, Driver: p.Driver, Pool: p.Name, Device: d.Name, Shares: d.Shares, Use: d.Use}
			consumed := usage.Consumed(structured.MakeDeviceID(p.Driver, p.Name, d.Name))
			for _, name := range slices.Sorted(maps.Keys(d.Capacity)) {
				total := d.Capacity[name].Value
				used := resource.Quantity{}
				if q := consumed[name]; q != nil {
					used = q.DeepCopy()
				}
				free := total.DeepCopy()
				free.Sub(used)
				sd.Capacity = append(sd.Capacity, SharedCapacity{Name: string(name), Total: total.String(), Consumed: used.String(), Free: free.String()})
			}
			out = append(out, sd)
		}
	}
	return out
}

func add(rows map[string]*Row, key string, proto Row, node, group string, e dynres.Entry) {
	r := rows[key]
	if r == nil {
		r = &proto
		rows[key] = r
	}
	total, free, tainted := e.Units()
	part := Part{Name: node, Total: total, Allocated: total - free - tainted, Free: free, Tainted: tainted}
	r.Total += part.Total
	r.Allocated += part.Allocated
	r.Free += part.Free
	r.Tainted += part.Tainted
	if e.Hardware != nil {
		r.Partitions = addPartitions(r.Partitions, e.Hardware.Partitions)
	}
	r.Nodes = append(r.Nodes, part)
	for i := range r.Groups {
		if r.Groups[i].Name == group {
			g := &r.Groups[i]
			g.Total += part.Total
			g.Allocated += part.Allocated
			g.Free += part.Free
			g.Tainted += part.Tainted
			return
		}
	}
	part.Name = group
	r.Groups = append(r.Groups, part)
}

func addPartitions(to, from []devicepools.Partition) []devicepools.Partition {
	for _, p := range from {
		found := false
		for i := range to {
			if to[i].Profile == p.Profile {
				to[i].Total += p.Total
				to[i].Free += p.Free
				found = true
				break
			}
		}
		if !found {
			to = append(to, p)
		}
	}
	sort.Slice(to, func(i, j int) bool { return to[i].Profile < to[j].Profile })
	return to
}

func sorted(rows map[string]*Row) []Row {
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		sort.Slice(r.Groups, func(i, j int) bool { return r.Groups[i].Name < r.Groups[j].Name })
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Source < out[j].Source
	})
	return out
}
