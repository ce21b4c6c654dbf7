package scaleup

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// partitionGroup: nodes with two 80Gi GPUs, each offered whole or as two
// 40Gi partitions drawing on the GPU's shared counter.
func partitionGroup(maxSize int) *nodegroup.NodeGroup {
	counters := resourceapi.ResourceSliceSpec{Driver: fx.Driver}
	devices := resourceapi.ResourceSliceSpec{Driver: fx.Driver}
	consume := func(gpu, mem string) []resourceapi.DeviceCounterConsumption {
		return []resourceapi.DeviceCounterConsumption{{CounterSet: gpu + "-counters",
			Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse(mem)}}}}
	}
	kind := func(k string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"kind": {StringValue: ptr.To(k)}}
	}
	for _, gpu := range []string{"gpu-0", "gpu-1"} {
		counters.SharedCounters = append(counters.SharedCounters, resourceapi.CounterSet{Name: gpu + "-counters",
			Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse("80Gi")}}})
		devices.Devices = append(devices.Devices,
			resourceapi.Device{Name: gpu, Attributes: kind("whole"), ConsumesCounters: consume(gpu, "80Gi")},
			resourceapi.Device{Name: gpu + "-part-0", Attributes: kind("part"), ConsumesCounters: consume(gpu, "40Gi")},
			resourceapi.Device{Name: gpu + "-part-1", Attributes: kind("part"), ConsumesCounters: consume(gpu, "40Gi")},
		)
	}
	return &nodegroup.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{MinSize: 0, MaxSize: maxSize, Template: *fx.Node("template", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{counters, devices}},
	}
}

func kindClass(name, kind string, resourceName v1.ResourceName) *resourceapi.DeviceClass {
	c := fx.Class(name, fx.Driver, resourceName, fx.Epoch)
	c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].kind == %q", fx.Driver, fx.Driver, kind)}}}
	return c
}

// Partition pods created first spread over the new nodes under the
// scheduler's scoring, each blocking a whole GPU on its node: the plan
// must count the nodes that takes, not those of tight packing.
func TestPartitionPodsSpreadAsTheSchedulerScores(t *testing.T) {
	tests := []struct {
		name          string
		partsFirst    bool
		parts, wholes int
		wantNodes     int
		wantNoScaleUp int
		maxSize       int
	}{
		// Packing: parts share gpu-0 of node 0 -> 2 nodes. Scoring puts
		// one part on each node, leaving one whole GPU each: 3 wholes
		// need a third node.
		{name: "partition pods first", partsFirst: true, parts: 2, wholes: 3, wantNodes: 3, maxSize: 10},
		{name: "whole pods first", partsFirst: false, parts: 2, wholes: 3, wantNodes: 2, maxSize: 10},
		{name: "room runs out", partsFirst: true, parts: 2, wholes: 3, wantNodes: 2, wantNoScaleUp: 1, maxSize: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetDeviceClass(kindClass("gpu.example.com", "whole", "example.com/gpu"))
			snap.SetDeviceClass(kindClass("part.example.com", "part", "example.com/gpu-part"))
			p := newPlanner(t, snap, partitionGroup(tc.maxSize))
			// newPlanner adds its own class; keep ours for example.com/gpu.
			snap.SetDeviceClass(kindClass("gpu.example.com", "whole", "example.com/gpu"))
			var pods []*v1.Pod
			at := func(i int) metav1.Time { return metav1.NewTime(fx.Epoch.Add(time.Duration(i) * time.Second)) }
			for i := 0; i < tc.parts; i++ {
				pod := fx.Pod(fmt.Sprintf("part-%d", i), 1000, fx.GPUs("example.com/gpu-part", 1))
				pods = append(pods, pod)
			}
			for i := 0; i < tc.wholes; i++ {
				pods = append(pods, fx.Pod(fmt.Sprintf("whole-%d", i), 1000, fx.GPUs("example.com/gpu", 1)))
			}
			if !tc.partsFirst {
				pods = append(pods[tc.parts:], pods[:tc.parts]...)
			}
			for i, pod := range pods {
				pod.CreationTimestamp = at(i)
			}
			plan, err := p.Plan(pods)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, su := range plan.ScaleUps {
				got += su.NewNodes
			}
			if got != tc.wantNodes || len(plan.NoScaleUp) != tc.wantNoScaleUp {
				t.Fatalf("new nodes %d, pods without scale-up %+v; want %d nodes, %d without", got, plan.NoScaleUp, tc.wantNodes, tc.wantNoScaleUp)
			}
		})
	}
}
