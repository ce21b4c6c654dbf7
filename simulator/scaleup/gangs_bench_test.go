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

// 200 gangs of 8 one-GPU pods and 2,000 single one-GPU pods on a fleet
// of 1,000 8-GPU nodes, each gang asked all at once on a new node of its
// own. full-fleet: every GPU is taken, the single pods go to 250 new
// nodes; target <= 1 s CPU a plan. free-room: 6 GPUs of each node are
// taken, the single pods fill the 2,000 free ones where the scheduler
// would score them best (the cost of scoring every node for every pod,
// not of the gangs).
func BenchmarkGangs(b *testing.B) {
	for _, bc := range []struct {
		name         string
		used         int
		wantNewNodes int
		wantOnFleet  int
	}{
		{name: "full-fleet", used: 8, wantNewNodes: 450},
		{name: "free-room", used: 6, wantNewNodes: 200, wantOnFleet: 2000},
	} {
		b.Run(bc.name, func(b *testing.B) { benchmarkGangs(b, bc.used, bc.wantNewNodes, bc.wantOnFleet) })
	}
}

func benchmarkGangs(b *testing.B, used, wantNewNodes, wantOnFleet int) {
	var pods []*v1.Pod
	var groups []*schedulingv1beta1.PodGroup
	for i := range 200 {
		name := fmt.Sprintf("gang-%03d", i)
		pods = append(pods, inGroup(name, replicas(name, 8, 100, fx.GPUs(fx.GPUResource, 1)))...)
		groups = append(groups, gangGroup(name, 8))
	}
	pods = append(pods, replicas("web", 2000, 100, fx.GPUs(fx.GPUResource, 1))...)
	fleet := fx.BusyGPUFleet(1000, used, "gpu.example.com", nodegroup.GroupLabel, "gpu-dra")
	gangs := gang.NewIndex(gang.Sources{PodGroups: groups}, pods)
	b.ReportAllocs()
	var cpu float64
	for b.Loop() {
		b.StopTimer()
		snap := snapshot.New()
		snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
		if err := fleet.AddTo(snap); err != nil {
			b.Fatal(err)
		}
		p := newPlanner(b, snap, draGroup("gpu-dra", 8, 2000))
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
			if su.Atomic && su.NewNodes == 1 && len(su.Pods) == 8 {
				steps++
			}
		}
		if steps != 200 || newNodes(plan) != wantNewNodes || len(plan.ExistingNodes) != wantOnFleet || len(plan.NoScaleUp) != 0 {
			b.Fatalf("%d gang steps of one node, %d new nodes, %d pods on the fleet, %d refused; want 200, %d, %d, 0",
				steps, newNodes(plan), len(plan.ExistingNodes), len(plan.NoScaleUp), wantNewNodes, wantOnFleet)
		}
	}
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}
