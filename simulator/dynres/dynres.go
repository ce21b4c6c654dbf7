// Package dynres answers, for a node or a template node, which extended
// resources it offers and by which path: per extended resource name backed
// by DRA, the DeviceClass, how many matching devices the node's
// ResourceSlices offer and how many are free; per device-plugin resource,
// the node's allocatable. It is the KEP's NodeInfo.Allocatable
// .DynamicResources, used for reports and reasons.
package dynres

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/kubernetes/pkg/features"

	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/snapshot"
)

// Source says how a node provides an extended resource.
type Source string

const (
	DRA          Source = "DRA"
	DevicePlugin Source = "device plugin"
)

// Entry is one extended resource a node offers.
type Entry struct {
	Resource v1.ResourceName `json:"resource"`
	Source   Source          `json:"source"`
	Class    string          `json:"deviceClass,omitempty"`
	Offered  int64           `json:"offered"`
	// Free counts the offered devices a claim could get now: not
	// allocated, and in a partitioned pool with their counters still
	// free (a GPU one of whose MIG partitions is taken is not).
	Free int64 `json:"free"`
	// Tainted counts the offered devices, not allocated, that a
	// NoSchedule or NoExecute taint (on the slice or from a
	// DeviceTaintRule) keeps from claims without a toleration; they are
	// not in Free.
	Tainted int64 `json:"tainted,omitempty"`
	// Hardware, set when the class's devices share counters, counts the
	// hardware they partition (see Units).
	Hardware *devicepools.Hardware `json:"hardware,omitempty"`
}

func (e Entry) String() string {
	if e.Source == DRA {
		return fmt.Sprintf("%s: %d (DRA, DeviceClass %s)", e.Resource, e.Offered, e.Class)
	}
	return fmt.Sprintf("%s: %d (device plugin)", e.Resource, e.Offered)
}

// Matcher evaluates DeviceClass selectors; compiled programs are cached so
// each expression is compiled once.
type Matcher struct {
	cache *cel.Cache
}

// NewMatcher returns a matcher with the CEL features the scheduler's
// DynamicResources plugin compiles with under the feature gates in force
// (set them first: --feature-gates).
func NewMatcher() *Matcher {
	return &Matcher{cache: cel.NewCache(256, CELFeatures())}
}

// CELFeatures are the scheduler's CEL features under the gates in force.
func CELFeatures() cel.Features {
	gates := utilfeature.DefaultFeatureGate
	return cel.Features{
		EnableConsumableCapacity: gates.Enabled(features.DRAConsumableCapacity),
		EnableListTypeAttributes: gates.Enabled(features.DRAListTypeAttributes),
	}
}

// Matches reports whether a device satisfies every selector of a class.
func (m *Matcher) Matches(class *resourceapi.DeviceClass, driver string, dev *resourceapi.Device) (bool, error) {
	for i, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		prog := m.cache.GetOrCompile(sel.CEL.Expression)
		if prog.Error != nil {
			return false, fmt.Errorf("DeviceClass %s: spec.selectors[%d].cel.expression: %s", class.Name, i, prog.Error.Detail)
		}
		ok, _, err := prog.DeviceMatches(context.Background(), cel.Device{
			Driver: driver, AllowMultipleAllocations: dev.AllowMultipleAllocations,
			Attributes: dev.Attributes, Capacity: dev.Capacity,
		})
		if err != nil {
			return false, fmt.Errorf("DeviceClass %s: spec.selectors[%d]: %w", class.Name, i, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// ClassError reports a DeviceClass whose selectors cannot be evaluated.
func (m *Matcher) ClassError(class *resourceapi.DeviceClass) error {
	for i, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		if prog := m.cache.GetOrCompile(sel.CEL.Expression); prog.Error != nil {
			return fmt.Errorf("DeviceClass %s: spec.selectors[%d].cel.expression does not compile: %s", class.Name, i, prog.Error.Detail)
		}
	}
	return nil
}

// ForNode lists the extended resources a node offers, sorted by resource
// name then source. A resource in the node's allocatable is served by a
// device plugin there (NodeResourcesFit leaves it to DRA only when the
// allocatable is 0). Classes whose selectors fail are skipped; use
// ClassError to report them.
func (m *Matcher) ForNode(snap *snapshot.Snapshot, nodeName string) []Entry {
	ni := snap.NodeInfo(nodeName)
	if ni == nil {
		return nil
	}
	var out []Entry
	alloc := ni.Node().Status.Allocatable
	for name, q := range alloc {
		if !IsExtended(name) || q.IsZero() {
			continue
		}
		used := ni.Requested.ScalarResources[name]
		out = append(out, Entry{Resource: name, Source: DevicePlugin, Offered: q.Value(), Free: q.Value() - used})
	}
	pools := devicepools.ForNode(snap, nodeName)
	left := make([]devicepools.Remaining, len(pools))
	for i, p := range pools {
		left[i] = p.Remaining(false)
	}
	classList, _ := snap.Classes().List()
	for _, class := range classList {
		var offered, free, tainted int64
		matches := func(driver string, d *resourceapi.Device) bool {
			ok, err := m.Matches(class, driver, d)
			return err == nil && ok
		}
		for i, p := range pools {
			for _, d := range p.Devices {
				if !matches(p.Driver, d.Device) {
					continue
				}
				offered++
				switch {
				case d.Allocated:
				case devicepools.KeepsOut(d.Device.Taints):
					tainted++
				case left[i].Fits(d.Device):
					free++
				}
			}
		}
		if offered == 0 {
			continue
		}
		hw := devicepools.HardwareOf(pools, matches)
		for _, rName := range snap.Classes().ResourceNames(class.Name) {
			if q, ok := alloc[rName]; ok && !q.IsZero() {
				continue // the device plugin path wins on this node
			}
			out = append(out, Entry{Resource: rName, Source: DRA, Class: class.Name, Offered: offered, Free: free, Tainted: tainted, Hardware: hw})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resource != out[j].Resource {
			return out[i].Resource < out[j].Resource
		}
		return out[i].Source < out[j].Source
	})
	return out
}

// Lookup returns the entry for one resource name, if the node offers it.
func Lookup(entries []Entry, name v1.ResourceName) (Entry, bool) {
	for _, e := range entries {
		if e.Resource == name {
			return e, true
		}
	}
	return Entry{}, false
}

// IsExtended reports whether a resource name is an extended resource
// (not cpu, memory, pods, ephemeral storage, hugepages or volume limits).
func IsExtended(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage:
		return false
	}
	for _, p := range []string{"hugepages-", "attachable-volumes-"} {
		if len(name) >= len(p) && string(name[:len(p)]) == p {
			return false
		}
	}
	return true
}

// Units counts an entry as hardware: whole devices where its class's
// devices share counters, else devices. --gpu-total, capacity and the
// device metrics count these. tainted is out of free, not in use.
func (e Entry) Units() (total, free, tainted int64) {
	if e.Hardware != nil {
		return e.Hardware.Units, e.Hardware.Free, e.Hardware.Tainted
	}
	return e.Offered, e.Free, e.Tainted
}
