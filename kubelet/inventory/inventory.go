// Package inventory describes the devices a node's DRA driver owns and
// turns that description into the ResourceSlices the driver publishes.
// The reference driver and the test nodes read the same file, so what a
// user configures is what the scheduler sees.
package inventory

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"
)

// Inventory is the driver's device list, as written in its YAML file:
//
//	devices:
//	- name: gpu            # with count: gpu-0 .. gpu-7; without: one device "gpu"
//	  count: 8
//	  attributes:
//	    model: {string: example-a100}
//	  capacity:
//	    memory: {value: 80Gi}
//
// Attributes and capacity use the resource.k8s.io/v1 field names, so any
// value a ResourceSlice accepts can be written here.
type Inventory struct {
	Groups []Group `json:"devices"`
}

// Group is one kind of device, or a single named device.
type Group struct {
	// Name is the device name, or with Count the prefix of Name-0 ..
	// Name-(Count-1).
	Name string `json:"name"`
	// Count of devices in the group; 0 means one device called Name.
	Count      int                                                       `json:"count,omitempty"`
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

// Uniform is an inventory of count devices prefix-0 .. prefix-(count-1),
// each with a "model" attribute, for the driver's --devices shortcut.
func Uniform(prefix string, count int, model string) Inventory {
	g := Group{Name: prefix, Count: count}
	if model != "" {
		g.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &model}}
	}
	return Inventory{Groups: []Group{g}}
}

// Load reads an inventory file (YAML or JSON); unknown fields are errors,
// so a typo does not silently publish devices without an attribute.
func Load(path string) (Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Inventory{}, err
	}
	var inv Inventory
	if err := yaml.UnmarshalStrict(data, &inv); err != nil {
		return Inventory{}, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := inv.Devices(); err != nil {
		return Inventory{}, fmt.Errorf("%s: %w", path, err)
	}
	return inv, nil
}

// Devices expands the groups into ResourceSlice devices in file order,
// checking that names are DNS labels and unique.
func (inv Inventory) Devices() ([]resourceapi.Device, error) {
	var out []resourceapi.Device
	seen := map[string]bool{}
	var errs []error
	for i, g := range inv.Groups {
		if g.Count < 0 {
			errs = append(errs, fmt.Errorf("devices[%d]: negative count %d", i, g.Count))
			continue
		}
		names := []string{g.Name}
		if g.Count > 0 {
			names = make([]string, g.Count)
			for j := range names {
				names[j] = g.Name + "-" + strconv.Itoa(j)
			}
		}
		for _, name := range names {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, fmt.Errorf("devices[%d]: device name %q: %s", i, name, msg))
			}
			if seen[name] {
				errs = append(errs, fmt.Errorf("devices[%d]: device %q listed twice", i, name))
			}
			seen[name] = true
			out = append(out, resourceapi.Device{Name: name, Attributes: copyMap(g.Attributes), Capacity: copyMap(g.Capacity)})
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no devices"))
	}
	return out, errors.Join(errs...)
}

// Resources is what the driver publishes for a node: one pool named after
// the node, split into slices of at most ResourceSliceMaxDevices devices
// (the API's limit per slice). Pool and slice count are kept by the
// resourceslice controller, so the pool is always complete.
func (inv Inventory) Resources(nodeName string) (resourceslice.DriverResources, error) {
	devices, err := inv.Devices()
	if err != nil {
		return resourceslice.DriverResources{}, err
	}
	var slices []resourceslice.Slice
	for start := 0; start < len(devices); start += resourceapi.ResourceSliceMaxDevices {
		end := min(start+resourceapi.ResourceSliceMaxDevices, len(devices))
		slices = append(slices, resourceslice.Slice{Devices: devices[start:end]})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: {Slices: slices}}}, nil
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
