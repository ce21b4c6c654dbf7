package provreq

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
)

// halfFullFleet is nodes of 8 GPUs, each with 4 taken by running one-GPU
// pods (extended-resource claims allocated, as the scheduler leaves them).
func halfFullFleet(b *testing.B, nodes int) *scaleup.Planner {
	b.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
	if err := fx.BusyGPUFleet(nodes, 4, gpuClass, nodegroup.GroupLabel, "gpu").AddTo(snap); err != nil {
		b.Fatal(err)
	}
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		b.Fatal(err)
	}
	exp, _ := expander.New("least-waste", nil, 1)
	slice := fx.GPUSlice("x", 8)
	group := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: nodegroup.Spec{MaxSize: nodes + 1000,
		Template: *fx.Node("template", 64, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{slice.Spec}}}
	return &scaleup.Planner{Engine: eng, Groups: []*nodegroup.NodeGroup{group}, Expander: exp}
}

// 100 check-capacity requests of 16 one-GPU pods on a 5,000-node fleet,
// half its GPUs taken, decided in one batch: every request fits, each
// seeing the room the earlier ones took. Target: <= 1 s CPU.
func BenchmarkCheckCapacityBatch(b *testing.B) {
	planner := halfFullFleet(b, 5000)
	var prs []*prv1.ProvisioningRequest
	for i := range 100 {
		prs = append(prs, request(fmt.Sprintf("cc-%03d", i), CheckCapacity, "extended", 16))
	}
	e := &Decider{Planner: planner, Templates: templates(extendedTemplate())}
	snap := planner.Engine.Snapshot()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		snap.Fork()
		for _, pr := range prs {
			d, err := e.Decide(ctx, pr)
			if err != nil || !d.Provisioned() {
				b.Fatalf("%s: %+v %v", pr.Name, d.Condition, err)
			}
		}
		snap.Revert()
	}
}

// One best-effort-atomic request of 512 whole GPUs on NVIDIA's DynamicMIG
// H100 nodes (8 GPUs, 208 devices sharing counters each): 64 nodes in one
// step. Target: <= 1 s.
func BenchmarkAtomicDynamicMIG(b *testing.B) {
	snap := snapshot.New()
	for _, c := range fx.NVIDIAClasses() {
		snap.SetDeviceClass(c)
	}
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("whole-gpu", "gpu.nvidia.com", 1))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		b.Fatal(err)
	}
	slices := fx.NVIDIADynamicMIG("template", 8)
	specs := make([]resourceapi.ResourceSliceSpec, len(slices))
	for i, s := range slices {
		specs[i] = s.Spec
	}
	group := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec: nodegroup.Spec{MaxSize: 1000, Template: *fx.H100Node("template"), ResourceSlices: specs}}
	exp, _ := expander.New("least-waste", nil, 1)
	planner := &scaleup.Planner{Engine: eng, Groups: []*nodegroup.NodeGroup{group}, Expander: exp}
	whole := podTemplate("whole", fx.WithTemplateClaim(fx.Pod("x", 2000, nil), "gpu", "whole-gpu"))
	e := &Decider{Planner: planner, Templates: templates(whole)}
	pr := request("train", BestEffortAtomic, "whole", 512)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		snap.Fork()
		d, err := e.Decide(ctx, pr)
		if err != nil || len(d.ScaleUps) != 1 || d.ScaleUps[0].NewNodes != 64 {
			b.Fatalf("%+v %+v %v, want h100 +64", d.Condition, d.ScaleUps, err)
		}
		snap.Revert()
	}
}
