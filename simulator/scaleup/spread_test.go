package scaleup

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// The scored check's fast placement (estimator.Spread: each pod scheduled
// against one node per class of alike nodes, choices remembered across
// counts, placements copied) must plan exactly what scheduling every pod
// against every new node plans: node counts, each pod's node and devices,
// and the pods left out.
func TestSpreadPlansAsTheExhaustiveScoredCheck(t *testing.T) {
	random := func(seed uint64, n int) func() []*v1.Pod {
		return func() []*v1.Pod {
			r := rand.New(rand.NewPCG(seed, 27))
			kinds := append([]string{"gpu"}, migProfiles()...)
			cpus := []int64{1000, 4000, 24000}
			pods := make([]*v1.Pod, n)
			for i := range pods {
				k := kinds[r.IntN(len(kinds))]
				pods[i] = migPod(fmt.Sprintf("r%d-%03d-%s", seed, i, k), k, cpus[r.IntN(len(cpus))])
				pods[i].CreationTimestamp = metav1.NewTime(fx.Epoch.Add(time.Duration(r.IntN(n)) * time.Second))
				if r.IntN(4) == 0 {
					pods[i].Spec.Priority = ptr.To(int32(r.IntN(3)))
				}
			}
			return pods
		}
	}
	parts := func(n int, partsFirst bool) func() []*v1.Pod {
		return func() []*v1.Pod {
			var pods []*v1.Pod
			for i := range n {
				name, res := fmt.Sprintf("x-%03d-part", i), v1.ResourceName("example.com/gpu-part")
				if (i%3 == 0) != partsFirst && i >= n/3 || partsFirst && i >= n/3 && i%2 == 0 {
					name, res = fmt.Sprintf("x-%03d-whole", i), "example.com/gpu"
				}
				pods = append(pods, fx.Pod(name, 1000, fx.GPUs(res, 1)))
			}
			return pods
		}
	}
	mig := func(gpus, maxSize int) func() []*nodegroup.NodeGroup {
		return func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{migGroup(gpus, maxSize)} }
	}
	tests := []struct {
		name   string
		groups func() []*nodegroup.NodeGroup
		pods   func() []*v1.Pod
	}{
		{"whole, 1g, 3g in turn", mig(2, 100), func() []*v1.Pod { return migPods(45, "gpu", "1g", "3g") }},
		{"1g runs before 3g and whole", mig(2, 100), func() []*v1.Pod { return migPods(40, "1g", "1g", "1g", "3g", "gpu") }},
		{"every profile", mig(2, 100), func() []*v1.Pod { return migPods(42, append(migProfiles(), "gpu")...) }},
		{"random 1", mig(2, 100), random(1, 40)},
		{"random 2", mig(2, 100), random(2, 40)},
		{"random 3, 8 GPUs", mig(8, 100), random(3, 60)},
		{"room runs out", mig(2, 6), func() []*v1.Pod { return migPods(45, "gpu", "1g", "3g") }},
		{"extended-resource partitions first", func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{partitionGroup(100)} }, parts(30, true)},
		{"extended-resource partitions interleaved", func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{partitionGroup(100)} }, parts(30, false)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := func(exhaustive bool) string {
				snap := snapshot.New()
				migSetup(snap)
				p := newPlanner(t, snap, tc.groups()...)
				snap.SetDeviceClass(kindClass("gpu.example.com", "whole", "example.com/gpu"))
				snap.SetDeviceClass(kindClass("part.example.com", "part", "example.com/gpu-part"))
				p.exhaustiveScored = exhaustive
				plan, err := p.Plan(tc.pods())
				if err != nil {
					t.Fatal(err)
				}
				return planSummary(plan)
			}
			want, got := plan(true), plan(false)
			if got != want {
				t.Fatalf("fast scored check plans\n%s\nexhaustive plans\n%s", got, want)
			}
			t.Logf("%s", strings.SplitN(want, "\n", 2)[0])
		})
	}
}

// planSummary is the plan's node counts, each pod's node and devices, and
// the pods left out, one per line.
func planSummary(plan *Plan) string {
	var b strings.Builder
	nodes := 0
	for _, su := range plan.ScaleUps {
		nodes += su.NewNodes
	}
	fmt.Fprintf(&b, "%d new nodes, %d pods left out\n", nodes, len(plan.NoScaleUp))
	for _, su := range plan.ScaleUps {
		fmt.Fprintf(&b, "%s +%d\n", su.NodeGroup, su.NewNodes)
		for _, pl := range su.Placements {
			fmt.Fprintf(&b, "  %s -> %s %v\n", pl.Pod.Name, pl.Node, pl.Devices)
		}
	}
	for _, n := range plan.NoScaleUp {
		fmt.Fprintf(&b, "left out %s: %s\n", n.Pod.Name, n.Code)
	}
	return b.String()
}

// Pods of several sizes and no devices are placed on the new nodes as the
// scheduler's least-allocated scoring places them, not packed first fit:
// two 2-CPU pods go to two 4-CPU nodes, one each, and the 4-CPU pod after
// them needs a third node. Packed first fit, two nodes would do, and the
// scheduler would leave the 4-CPU pod pending on them.
func TestMixedSizesWithoutDevicesArePlacedAsScored(t *testing.T) {
	var pods []*v1.Pod
	for i, cpu := range []int64{2000, 2000, 4000} {
		pod := fx.Pod(fmt.Sprintf("p%d-%dm", i, cpu), cpu, nil)
		pod.CreationTimestamp = metav1.NewTime(fx.Epoch.Add(time.Duration(i) * time.Second))
		pods = append(pods, pod)
	}
	p := newPlanner(t, snapshot.New(), plainGroup("cpu", 4, 10, nil))
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 3 || len(plan.NoScaleUp) != 0 {
		t.Fatalf("plan = %+v (no scale-up %+v), want cpu +3 nodes for the 3 pods", plan.ScaleUps, plan.NoScaleUp)
	}
	nodeOf := map[string]string{}
	for _, pl := range plan.ScaleUps[0].Placements {
		nodeOf[pl.Pod.Name] = pl.Node
	}
	a, b, big := nodeOf["p0-2000m"], nodeOf["p1-2000m"], nodeOf["p2-4000m"]
	if a == b || big == a || big == b {
		t.Fatalf("placements %v, want each pod on a node of its own (the scheduler spreads the 2-CPU pods)", nodeOf)
	}
}
