// Package limits holds the Cluster Autoscaler's cluster-wide resource
// limits (--cores-total, --memory-total, --gpu-total), the per scale-up
// node cap (--max-nodes-per-scaleup) and the balancing of similar node
// groups (--balance-similar-node-groups, --balancing-ignore-label,
// --balancing-label): their parsing, shared by draxr-autoscaler and draxr
// simulate, and the counting of what each node takes from a limit.
//
// GPUs are counted by extended resource name, whichever way a node offers
// it: a device plugin's allocatable (nvidia.com/gpu: 8) or the devices of
// its ResourceSlices that a DeviceClass maps to that name, through the
// class's spec.extendedResourceName or its implicit name
// deviceclass.resource.kubernetes.io/<class> (KEP-5004). Where those
// devices share counters (partitionable devices), a GPU is a counter set:
// the whole devices, not every partition published.
package limits

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"draxr.dev/draxr/simulator/dynres"
)

// Resource names of the limits, as CA's resource limiter names them; a GPU
// limit is named by its type (an extended resource name).
const (
	Cores  = "cpu"
	Memory = "memory"
)

// CA's defaults: --cores-total 0:320000, --memory-total 0:6400000 (GiB).
const (
	DefaultMaxCores     int64 = 320000
	DefaultMaxMemoryGiB int64 = 6400000
	GiB                 int64 = 1 << 30
)

// Range is a <min>:<max> limit. As in CA, a max of 0 means no maximum.
type Range struct {
	Min, Max int64
}

// GPULimit is one --gpu-total <gpu_type>:<min>:<max>.
type GPULimit struct {
	Type v1.ResourceName
	Range
}

// Limits are the cluster-wide limits. The zero value limits nothing.
type Limits struct {
	Cores  Range // cores
	Memory Range // bytes
	GPUs   []GPULimit
}

// Default returns CA's default limits.
func Default() Limits {
	return Limits{Cores: Range{Max: DefaultMaxCores}, Memory: Range{Max: DefaultMaxMemoryGiB * GiB}}
}

// Names lists the limited resources in a fixed order: cpu, memory, then
// the GPU types as given.
func (l Limits) Names() []string {
	out := []string{Cores, Memory}
	for _, g := range l.GPUs {
		out = append(out, string(g.Type))
	}
	return out
}

// Range returns the limit of one resource.
func (l Limits) Range(name string) Range {
	switch name {
	case Cores:
		return l.Cores
	case Memory:
		return l.Memory
	}
	for _, g := range l.GPUs {
		if string(g.Type) == name {
			return g.Range
		}
	}
	return Range{}
}

// HasMax reports whether any maximum is set.
func (l Limits) HasMax() bool {
	for _, n := range l.Names() {
		if l.Range(n).Max > 0 {
			return true
		}
	}
	return false
}

// HasMin reports whether any minimum is set.
func (l Limits) HasMin() bool {
	for _, n := range l.Names() {
		if l.Range(n).Min > 0 {
			return true
		}
	}
	return false
}

// NeedsDevices reports whether counting needs each node's extended
// resources (a GPU limit is set).
func (l Limits) NeedsDevices() bool { return len(l.GPUs) > 0 }

// Amounts are what one node (or many) counts toward each limit.
type Amounts map[string]int64

// Add adds n times b to a.
func (a Amounts) Add(b Amounts, n int64) {
	for k, v := range b {
		a[k] += v * n
	}
}

// Take subtracts b from a for the resources a has: a spare or a budget
// loses what a node takes, and gains no resources it did not limit.
func (a Amounts) Take(b Amounts) {
	for k := range a {
		a[k] -= b[k]
	}
}

// Of counts a node: its cores and memory capacity (as CA does) and, per
// GPU limit, how many of that extended resource it offers, by device
// plugin or by DRA (entries as dynres.Matcher.ForNode lists them).
func (l Limits) Of(node *v1.Node, extended []dynres.Entry) Amounts {
	a := Amounts{Cores: capacity(node, v1.ResourceCPU), Memory: capacity(node, v1.ResourceMemory)}
	for _, g := range l.GPUs {
		if e, ok := dynres.Lookup(extended, g.Type); ok {
			// Hardware, not devices: a DynamicMIG H100 publishes the GPU and
			// its MIG placements, all one GPU.
			a[string(g.Type)], _, _ = e.Units()
		} else {
			a[string(g.Type)] = 0
		}
	}
	return a
}

// capacity is CA's count of a node's cores or memory: its capacity,
// rounded up to a whole unit; allocatable when no capacity is given.
func capacity(node *v1.Node, name v1.ResourceName) int64 {
	q, ok := node.Status.Capacity[name]
	if !ok {
		if q, ok = node.Status.Allocatable[name]; !ok {
			return 0
		}
	}
	return max(q.Value(), 0)
}

// Left is, per resource with a maximum, how much more the cluster may
// add, given what it counts now (CA: max - total, never below 0).
func (l Limits) Left(total Amounts) Amounts {
	left := Amounts{}
	for _, n := range l.Names() {
		if r := l.Range(n); r.Max > 0 {
			left[n] = max(r.Max-total[n], 0)
		}
	}
	return left
}

// Spare is, per resource with a minimum, how much the cluster may lose
// before it goes below that minimum.
func (l Limits) Spare(total Amounts) Amounts {
	spare := Amounts{}
	for _, n := range l.Names() {
		if r := l.Range(n); r.Min > 0 {
			spare[n] = total[n] - r.Min
		}
	}
	return spare
}

// NodesWithin is how many nodes of per-node amounts fit in left, and the
// resources that allow none (when it is 0). A resource the node does not
// add to never limits it.
func NodesWithin(left, perNode Amounts, want int) (int, []string) {
	n := want
	var exceeded []string
	for _, name := range sortedKeys(left) {
		d := perNode[name]
		if d <= 0 {
			continue
		}
		fit := left[name] / d
		if fit < 1 {
			exceeded = append(exceeded, name)
		}
		if fit < int64(n) {
			n = int(fit)
		}
	}
	return max(n, 0), exceeded
}

// Exceeding lists the resources whose spare a node's removal would take
// below zero.
func Exceeding(spare, node Amounts) []string {
	var out []string
	for _, name := range sortedKeys(spare) {
		if node[name] > 0 && spare[name]-node[name] < 0 {
			out = append(out, name)
		}
	}
	return out
}

// sortedKeys orders cpu, memory, then the others by name, so messages
// are stable.
func sortedKeys(a Amounts) []string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		switch k {
		case Cores:
			return 0
		case Memory:
			return 1
		}
		return 2
	}
	sort.Slice(keys, func(i, j int) bool {
		if rank(keys[i]) != rank(keys[j]) {
			return rank(keys[i]) < rank(keys[j])
		}
		return keys[i] < keys[j]
	})
	return keys
}

// Flag names the flag that sets a resource's limit, with its value.
func (l Limits) Flag(name string) string {
	r := l.Range(name)
	switch name {
	case Cores:
		return fmt.Sprintf("--cores-total=%d:%d", r.Min, r.Max)
	case Memory:
		return fmt.Sprintf("--memory-total=%d:%d", r.Min/GiB, r.Max/GiB)
	}
	return fmt.Sprintf("--gpu-total=%s:%d:%d", name, r.Min, r.Max)
}

// Quantity prints an amount of a resource for people: memory in binary
// units, the rest as counts.
func Quantity(name string, v int64) string {
	if name == Memory {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return fmt.Sprintf("%d", v)
}

// MaxReached is CA's skip reason for a node group: "max cluster cpu
// limit reached", naming every resource that allows no node.
func MaxReached(resources []string) string {
	return fmt.Sprintf("max cluster %s limit reached", strings.Join(resources, ", "))
}
