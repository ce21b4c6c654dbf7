package scaleup

import (
	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/snapshot"
)

// waste is the mean unused share over the new nodes of CPU, memory and,
// where the node has DRA devices, devices: idle GPUs are the costliest
// waste a GPU node group can have. Counted-only nodes are weighed as what
// they hold: their pods' usage on a copy of their source node.
func waste(snap *snapshot.Snapshot, res *estimator.Result) float64 {
	var sum float64
	var nodes int
	counted := map[string]bool{}
	for _, c := range res.Counted {
		counted[c.Name] = true
		src := estimator.NodeUsage(snap, c.Source)
		n := float64(c.Pods)
		u := estimator.NodeUsageInfo{Allocatable: src.Allocatable, Requested: estimator.Usage{
			MilliCPU: n * c.PerPod.MilliCPU, Memory: n * c.PerPod.Memory, Devices: n * c.PerPod.Devices}}
		sum += u.Waste()
		nodes++
	}
	for _, name := range res.NewNodes {
		if counted[name] || snap.NodeInfo(name) == nil {
			continue
		}
		sum += estimator.NodeUsage(snap, name).Waste()
		nodes++
	}
	if nodes == 0 {
		return 0
	}
	return sum / float64(nodes)
}
