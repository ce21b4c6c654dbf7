package scaleup

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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
// take half a minute and six minutes (docs/performance.md).
func BenchmarkManyGroups(b *testing.B) {
	for _, layout := range []struct {
		name   string
		groups func() []*nodegroup.NodeGroup
	}{{"groups-400", func() []*nodegroup.NodeGroup { return instanceTypeGroups(false) }},
		{"groups-1200", func() []*nodegroup.NodeGroup { return instanceTypeGroups(true) }}} {
		for _, n := range []int{100, 500, 1000, 5000, 20000} {
			b.Run(fmt.Sprintf("%s/pods-%d", layout.name, n), func(b *testing.B) {
				if n > 1000 && os.Getenv("BENCH_MANYGROUPS_LARGE") != "1" {
					b.Skip("set BENCH_MANYGROUPS_LARGE=1: a plan this size takes from half a minute to minutes")
				}
				benchManyGroups(b, layout.groups, fiveKinds(n))
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

var benchZones = []string{"zone-a", "zone-b", "zone-c"}

// instanceTypeGroups are the 400 instance types as NodeGroups: one each,
// in zones in turn, or (perZone) one for each type in each zone.
func instanceTypeGroups(perZone bool) []*nodegroup.NodeGroup {
	var out []*nodegroup.NodeGroup
	for i := range 400 {
		zones := []string{benchZones[i%len(benchZones)]}
		if perZone {
			zones = benchZones
		}
		for _, zone := range zones {
			name := fmt.Sprintf("fake-it-%d", i)
			if perZone {
				name += "-" + zone
			}
			t := fx.Node("template", int64(i+1), 2*int64(i+1), nil)
			t.Status.Allocatable[v1.ResourcePods] = *resource.NewQuantity(10*int64(i+1), resource.DecimalSI)
			t.Status.Capacity = t.Status.Allocatable
			t.Labels[v1.LabelTopologyZone] = zone
			t.Labels[v1.LabelInstanceTypeStable] = fmt.Sprintf("fake-it-%d", i)
			out = append(out, &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: nodegroup.Spec{MaxSize: 100000, Template: *t}})
		}
	}
	return out
}

// fiveKinds makes n pods, a fifth of each kind, each kind one controller's,
// with CPU and memory drawn from a fixed seed.
func fiveKinds(n int) []*v1.Pod {
	rng := rand.New(rand.NewPCG(56, 400))
	kinds := []struct {
		name     string
		affinity func(p *v1.Pod, labels map[string]string)
	}{
		{"plain", func(*v1.Pod, map[string]string) {}},
		{"zone-spread", func(p *v1.Pod, l map[string]string) {
			p.Spec.TopologySpreadConstraints = spreadOver(v1.LabelTopologyZone, l)
		}},
		{"host-spread", func(p *v1.Pod, l map[string]string) {
			p.Spec.TopologySpreadConstraints = spreadOver(v1.LabelHostname, l)
		}},
		{"zone-affinity", func(p *v1.Pod, l map[string]string) {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: v1.LabelTopologyZone}}}}
		}},
		{"host-anti-affinity", func(p *v1.Pod, l map[string]string) {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: v1.LabelHostname}}}}
		}},
	}
	pods := make([]*v1.Pod, 0, n)
	for i := range n {
		k := kinds[i%len(kinds)]
		labels := map[string]string{"kind": k.name}
		p := fx.Pod(fmt.Sprintf("%s-%d", k.name, i/len(kinds)), 100+rng.Int64N(1401), nil)
		mem := resource.NewQuantity(100<<20+rng.Int64N(4<<30-100<<20+1), resource.BinarySI)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *mem
		p.Labels = labels
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: k.name,
			UID: types.UID("rs-" + k.name), Controller: ptr.To(true)}}
		k.affinity(p, labels)
		pods = append(pods, p)
	}
	return pods
}

func spreadOver(key string, labels map[string]string) []v1.TopologySpreadConstraint {
	return []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}
}
