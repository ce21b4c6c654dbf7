package scaleup

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// 1,000 busy 8-GPU nodes in racks of 20 (a group per rack, room for 10
// more nodes each), 100 gangs of 16 one-GPU pods that must each run in one
// rack and 2,000 single one-GPU pods: every gang gets 2 new nodes of one
// rack, the single pods 250 nodes anywhere. The cost should grow with the
// racks linearly (each gang is tried in every rack); target <= 1 cpu-s a
// plan at 50 racks.
func BenchmarkTopologyGangs(b *testing.B) {
	for _, racks := range []int{25, 50} {
		b.Run(fmt.Sprintf("%d-racks", racks), func(b *testing.B) { benchmarkTopologyGangs(b, racks, 1000) })
	}
}

func benchmarkTopologyGangs(b *testing.B, racks, nodes int) {
	var pods []*v1.Pod
	var pgs []*schedulingv1beta1.PodGroup
	for i := range 100 {
		name := fmt.Sprintf("gang-%03d", i)
		pods = append(pods, inGroup(name, replicas(name, 16, 100, fx.GPUs(fx.GPUResource, 1)))...)
		pgs = append(pgs, rackGang(name, 16))
	}
	pods = append(pods, replicas("web", 2000, 100, fx.GPUs(fx.GPUResource, 1))...)
	perRack := nodes / racks
	fleet := fx.BusyGPUFleet(nodes, 8, "gpu.example.com", nodegroup.GroupLabel, "")
	var groups []*nodegroup.NodeGroup
	for r := range racks {
		name, value := fmt.Sprintf("rack-%02d", r), fmt.Sprintf("r%02d", r)
		groups = append(groups, rackGroup(name, value, perRack+500/racks))
		for _, n := range fleet.Nodes[r*perRack : (r+1)*perRack] {
			n.Labels[nodegroup.GroupLabel], n.Labels[rackKey] = name, value
		}
	}
	gangs := gang.NewIndex(gang.Sources{PodGroups: pgs}, pods)
	b.ReportAllocs()
	var cpu float64
	for b.Loop() {
		b.StopTimer()
		snap := snapshot.New()
		snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
		if err := fleet.AddTo(snap); err != nil {
			b.Fatal(err)
		}
		p := newPlanner(b, snap, groups...)
		p.Gangs = gangs
		b.StartTimer()
		before := fx.ProcessCPU()
		plan, err := p.PlanContext(context.Background(), pods)
		cpu += (fx.ProcessCPU() - before).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		steps := 0
		for _, su := range plan.ScaleUps {
			if su.Atomic && su.Topology != nil && su.NodeGroup == "rack-"+su.Topology.Value[1:] && su.NewNodes == 2 && len(su.Pods) == 16 {
				steps++
			}
		}
		if steps != 100 || newNodes(plan) != 450 || len(plan.NoScaleUp) != 0 {
			b.Fatalf("%d gang steps of 2 nodes in their rack, %d new nodes, %d refused; want 100, 450, 0", steps, newNodes(plan), len(plan.NoScaleUp))
		}
	}
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}
