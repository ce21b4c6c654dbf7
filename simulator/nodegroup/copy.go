package nodegroup

import (
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// CopySliceSpecs returns the specs of a live node's slices as a template
// for new nodes of its group: what the driver will publish on a new
// machine of the same kind, not what it publishes on this one today.
//
//   - Device taints go: they are this machine's health (NVIDIA's driver
//     taints a GPU with an XID error, gpu.nvidia.com/xid), and a template
//     that kept them would make every new node a device short.
//   - A boolean attribute "healthy" (Intel's Gaudi driver sets it false on
//     a critical error) reads true: a new machine's devices are healthy,
//     and selectors that ask for healthy devices must still match them.
//     It is set, not dropped, since a selector reading a missing
//     attribute fails.
//   - Only each pool's newest generation is copied: a driver mid-update
//     publishes two, and copying both would double the devices.
//   - nodeName and pool go; NewNode fills them in per node.
//   - Slices that are not the node's own (allNodes, a nodeSelector: a
//     network-attached pool, also when its devices bindsToNode the node
//     that uses them, KEP-5007) are left out: a new machine does not
//     bring devices to a shared pool.
//
// Everything else is kept as it is, attributes that name one machine
// (serials, UUIDs, PCI bus IDs) included, since selectors may read them.
// A device the driver left out because it is broken cannot be restored:
// copy from a healthy node, or give the group template slices.
// Specs are ordered by driver then slice name, so a copy does not depend
// on list order.
func CopySliceSpecs(slices []*resourceapi.ResourceSlice) []resourceapi.ResourceSliceSpec {
	type pool struct{ driver, name string }
	newest := map[pool]int64{}
	for _, s := range slices {
		k := pool{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	sorted := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, s := range slices {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			continue
		}
		if s.Spec.Pool.Generation == newest[pool{s.Spec.Driver, s.Spec.Pool.Name}] {
			sorted = append(sorted, s)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Spec.Driver != sorted[j].Spec.Driver {
			return sorted[i].Spec.Driver < sorted[j].Spec.Driver
		}
		return sorted[i].Name < sorted[j].Name
	})
	out := make([]resourceapi.ResourceSliceSpec, 0, len(sorted))
	for _, s := range sorted {
		spec := s.Spec.DeepCopy()
		spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
		for i := range spec.Devices {
			d := &spec.Devices[i]
			d.Taints = nil
			for name, a := range d.Attributes {
				if isHealthAttribute(string(name)) && a.BoolValue != nil && !*a.BoolValue {
					a.BoolValue = ptr.To(true)
					d.Attributes[name] = a
				}
			}
		}
		out = append(out, *spec)
	}
	return out
}

func isHealthAttribute(name string) bool {
	return name == "healthy" || strings.HasSuffix(name, "/healthy")
}
