package estimator

import (
	"draxr.dev/draxr/simulator/snapshot"
)

// NodeUsageInfo is a node's requested share next to what it offers.
type NodeUsageInfo struct {
	Requested, Allocatable Usage
}

// NodeUsage reads a node's requested CPU and memory and its allocated DRA
// devices against what it offers; a device allocated several times counts
// the share of its capacity taken.
func NodeUsage(snap *snapshot.Snapshot, node string) NodeUsageInfo {
	ni := snap.NodeInfo(node)
	u := NodeUsageInfo{
		Requested:   Usage{MilliCPU: float64(ni.Requested.MilliCPU), Memory: float64(ni.Requested.Memory)},
		Allocatable: Usage{MilliCPU: float64(ni.Allocatable.MilliCPU), Memory: float64(ni.Allocatable.Memory)},
	}
	usage := snap.DeviceUsage()
	for _, s := range snap.SlicesForNode(node) {
		for i := range s.Spec.Devices {
			u.Allocatable.Devices++
			use, _ := usage.Of(s.Spec.Driver, s.Spec.Pool.Name, &s.Spec.Devices[i])
			u.Requested.Devices += use
		}
	}
	return u
}

// Waste is the mean unused share of the dimensions the node offers.
func (u NodeUsageInfo) Waste() float64 {
	var sum, dims float64
	for _, d := range [][2]float64{
		{u.Requested.MilliCPU, u.Allocatable.MilliCPU},
		{u.Requested.Memory, u.Allocatable.Memory},
		{u.Requested.Devices, u.Allocatable.Devices},
	} {
		if d[1] > 0 {
			sum += (d[1] - d[0]) / d[1]
			dims++
		}
	}
	if dims == 0 {
		return 0
	}
	return sum / dims
}

// Plus is u and v together.
func (u Usage) Plus(v Usage) Usage {
	return Usage{MilliCPU: u.MilliCPU + v.MilliCPU, Memory: u.Memory + v.Memory, Devices: u.Devices + v.Devices}
}
