package scaleup

import (
	"fmt"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// BenchmarkManyGroups is the shape of Karpenter's own scheduling
// benchmark (issue 56), written from its description: N pending pods of
// five equal kinds (plain; zone topology spread; hostname topology
// spread; required zone self-affinity; required hostname anti-affinity,
// one per node), 100m-1500m CPU and 100Mi-4Gi memory each, against 400
// instance types fake-it-i of i+1 vCPU, 2(i+1) GiB and 10(i+1) pods: one
// NodeGroup per type (each in one of three zones), or one per type and
// zone (1,200). Every pod must get a node. It reports the nodes, vCPUs
// and price planned (Karpenter's fake price: 0.1 per vCPU and per 10^9
// bytes of memory, per node) and the process CPU a plan takes (cpu-s/op).
//
// 5,000 and 20,000 pods run only with BENCH_MANYGROUPS_LARGE=1: they
// take about 5 and 40 cpu-s on a 2-core machine (docs/performance.md).
func BenchmarkManyGroups(b *testing.B) {
	for _, layout := range []struct {
		name   string
		groups func() []*nodegroup.NodeGroup
	}{{"groups-400", func() []*nodegroup.NodeGroup { return instanceTypeGroups(false) }},
		{"groups-1200", func() []*nodegroup.NodeGroup { return instanceTypeGroups(true) }}} {
		for _, n := range []int{100, 500, 1000, 5000, 20000} {
			b.Run(fmt.Sprintf("%s/pods-%d", layout.name, n), func(b *testing.B) {
				if n > 1000 && os.Getenv("BENCH_MANYGROUPS_LARGE") != "1" {
					b.Skip("set BENCH_MANYGROUPS_LARGE=1: a plan this size takes seconds to a minute")
				}
				benchManyGroups(b, layout.groups, fx.FiveKinds(n))
			})
		}
	}
}

func benchManyGroups(b *testing.B, groups func() []*nodegroup.NodeGroup, pods []*v1.Pod) {
	b.ReportAllocs()
	var cpu, price float64
	nodes, vcpus := 0, int64(0)
	for range b.N {
		b.StopTimer()
		gs := groups()
		cores, prices := map[string]int64{}, map[string]float64{}
		for _, g := range gs {
			alloc := g.Spec.Template.Status.Allocatable
			cores[g.Name] = alloc.Cpu().Value()
			prices[g.Name] = 0.1*float64(alloc.Cpu().Value()) + 0.1*float64(alloc.Memory().Value())/1e9
		}
		p := newPlanner(b, snapshot.New(), gs...)
		b.StartTimer()
		before := fx.ProcessCPU()
		plan, err := p.Plan(pods)
		cpu += (fx.ProcessCPU() - before).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.NoScaleUp) != 0 {
			b.Fatalf("%d of %d pods get no node (first: %v)", len(plan.NoScaleUp), len(pods), first(plan.NoScaleUp))
		}
		nodes, vcpus, price = 0, 0, 0
		for _, su := range plan.ScaleUps {
			nodes += su.NewNodes
			vcpus += int64(su.NewNodes) * cores[su.NodeGroup]
			price += float64(su.NewNodes) * prices[su.NodeGroup]
		}
	}
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(vcpus), "vcpus")
	b.ReportMetric(price, "price")
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}

// instanceTypeGroups are the 400 instance types as NodeGroups: one each,
// in zones in turn, or (perZone) one for each type in each zone.
func instanceTypeGroups(perZone bool) []*nodegroup.NodeGroup {
	var out []*nodegroup.NodeGroup
	all := fx.InstanceTypeZones()
	for i := range 400 {
		zones := []string{all[i%len(all)]}
		if perZone {
			zones = all
		}
		for _, zone := range zones {
			name := fmt.Sprintf("fake-it-%d", i)
			if perZone {
				name += "-" + zone
			}
			out = append(out, &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: nodegroup.Spec{MaxSize: 100000, Template: *fx.InstanceTypeNode(i, zone)}})
		}
	}
	return out
}
