package devicepools

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// NodeAllocatableDevices lists "device (resources)" for the devices of
// spec that carry nodeAllocatableResources.
func NodeAllocatableDevices(spec *resourceapi.ResourceSliceSpec) []string {
	var out []string
	for _, d := range spec.Devices {
		if len(d.NodeAllocatableResources) == 0 {
			continue
		}
		names := make([]string, 0, len(d.NodeAllocatableResources))
		for r := range d.NodeAllocatableResources {
			names = append(names, string(r))
		}
		sort.Strings(names)
		out = append(out, fmt.Sprintf("%s (%s)", d.Name, strings.Join(names, ", ")))
	}
	return out
}
