package scaleup

import (
	"draxr.dev/draxr/autoscaler/estimator"
	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/harness"
	"k8s.io/dynamic-resource-allocation/structured"
)

// waste is the mean unused share over the new nodes of CPU, memory and,
// where the node has DRA devices, devices: idle GPUs are the costliest
// waste a GPU node group can have.
func waste(h *harness.Harness, _ *dynres.Matcher, res *estimator.Result) float64 {
	snap := h.Snapshot()
	allocated := snap.AllocatedDeviceIDs()
	var sum float64
	var simulated int
	// Counted-only nodes are copies of a simulated node of the same kind,
	// so the mean over simulated nodes stands for all of them.
	for _, name := range res.NewNodes {
		ni := snap.NodeInfo(name)
		if ni == nil {
			continue
		}
		simulated++
		var parts, dims float64
		if a := ni.Allocatable.MilliCPU; a > 0 {
			parts += float64(a-ni.Requested.MilliCPU) / float64(a)
			dims++
		}
		if a := ni.Allocatable.Memory; a > 0 {
			parts += float64(a-ni.Requested.Memory) / float64(a)
			dims++
		}
		var devices, free int
		for _, s := range snap.SlicesForNode(name) {
			for _, d := range s.Spec.Devices {
				devices++
				if !allocated.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
					free++
				}
			}
		}
		if devices > 0 {
			parts += float64(free) / float64(devices)
			dims++
		}
		if dims > 0 {
			sum += parts / dims
		}
	}
	if simulated == 0 {
		return 0
	}
	return sum / float64(simulated)
}
