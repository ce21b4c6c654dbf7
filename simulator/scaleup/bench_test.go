package scaleup

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// claimPods makes n pods each with a ResourceClaim from the "one-gpu"
// template, which asks for one device of the gpu class.
func claimPods(prefix string, n int, milliCPU int64) []*v1.Pod {
	pods := replicas(prefix, n, milliCPU, nil)
	for _, p := range pods {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	}
	return pods
}

func oneGPUTemplate() *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}},
		}}},
	}
}

// ownClaimPods makes n unowned pods as job operators write them: each
// references its own pre-created one-GPU ResourceClaim by name
// (resourceClaimName). claims adds those claims to a snapshot.
func ownClaimPods(prefix string, n int, milliCPU int64) (pods []*v1.Pod, claims func(*snapshot.Snapshot)) {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pods = append(pods, fx.WithClaim(fx.Pod(name, milliCPU, nil), "gpu", name+"-gpu"))
	}
	return pods, func(snap *snapshot.Snapshot) {
		for _, p := range pods {
			snap.SetResourceClaim(fx.Claim(*p.Spec.ResourceClaims[0].ResourceClaimName, "gpu.example.com", 1))
		}
	}
}

// generatedClaimPods makes n unowned pods whose claim comes from the
// "one-gpu" template and was already generated, as the resourceclaim
// controller leaves them: a claim per pod, owned by it, named in
// status.resourceClaimStatuses.
func generatedClaimPods(prefix string, n int, milliCPU int64) (pods []*v1.Pod, claims func(*snapshot.Snapshot)) {
	for i := 0; i < n; i++ {
		p := fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("%s-%d", prefix, i), milliCPU, nil), "gpu", "one-gpu")
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(p.Name + "-gpu-x7k2q")}}
		pods = append(pods, p)
	}
	return pods, func(snap *snapshot.Snapshot) {
		for _, p := range pods {
			c := fx.Claim(*p.Status.ResourceClaimStatuses[0].ResourceClaimName, "gpu.example.com", 1)
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
			c.Annotations = map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"}
			snap.SetResourceClaim(c)
		}
	}
}

// unownedXRPods are the same pods as ownClaimPods asking example.com/gpu
// instead: what claim pods should cost.
func unownedXRPods(prefix string, n int, milliCPU int64) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = fx.Pod(fmt.Sprintf("%s-%d", prefix, i), milliCPU, fx.GPUs(fx.GPUResource, 1))
	}
	return pods
}

type benchCase struct {
	name   string
	groups func() []*nodegroup.NodeGroup
	pods   func() []*v1.Pod
	// setup adds what the pods reference (claims) to each fresh snapshot.
	setup     func(*snapshot.Snapshot)
	wantNodes int
}

func withSetup(name string, groups func() []*nodegroup.NodeGroup, pods []*v1.Pod, setup func(*snapshot.Snapshot), wantNodes int) benchCase {
	return benchCase{name: name, groups: groups, pods: func() []*v1.Pod { return pods }, setup: setup, wantNodes: wantNodes}
}

func BenchmarkScaleUpPlan(b *testing.B) {
	gpuGroup := func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{draGroup("gpu", 8, 10000)} }
	ownPods, ownClaims := ownClaimPods("job", 4000, 100)
	genPods, genClaims := generatedClaimPods("gen", 4000, 100)
	// Ten times CA's size: 40,000 pods onto 5,000 new nodes.
	ownPods10x, ownClaims10x := ownClaimPods("job", 40000, 100)
	cases := []benchCase{
		// The Cluster Autoscaler's DRA scale-up shape: 4,000 pending pods,
		// each with its own one-device claim, onto 8-device nodes: 500 new
		// nodes. xr-4000 is the same pods asking an extended resource.
		{"xr-4000", gpuGroup, func() []*v1.Pod { return unownedXRPods("xr", 4000, 100) }, nil, 500},
		withSetup("own-claims-4000", gpuGroup, ownPods, ownClaims, 500),
		withSetup("generated-claims-4000", gpuGroup, genPods, genClaims, 500),
		withSetup("own-claims-40000", gpuGroup, ownPods10x, ownClaims10x, 5000),
		{"xr-40000", gpuGroup, func() []*v1.Pod { return unownedXRPods("xr", 40000, 100) }, nil, 5000},
		{"xr-5000", func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{draGroup("gpu", 8, 10000)} },
			func() []*v1.Pod { return replicas("xr", 5000, 100, fx.GPUs(fx.GPUResource, 1)) }, nil, 625},
		{"claim-5000", func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{draGroup("gpu", 8, 10000)} },
			func() []*v1.Pod { return claimPods("claim", 5000, 100) }, nil, 625},
		{"deviceplugin-5000", func() []*nodegroup.NodeGroup { return []*nodegroup.NodeGroup{devicePluginGroup("gpu", 8, 10000)} },
			func() []*v1.Pod { return replicas("dp", 5000, 100, fx.GPUs(fx.GPUResource, 1)) }, nil, 625},
		{"mixed-30000", mixedGroups, mixedPods, nil, mixedWantNodes},
		// NVIDIA's DynamicMIG H100 nodes (8 GPUs), pods asking a whole
		// GPU, a 1g.10gb or a 3g.40gb MIG device in turn. Tightest
		// packing: a GPU holds two 3g, or one 3g and four 1g, or seven
		// 1g; 10,000 pods (3,334 whole) need at least 3,334 + 1,250 +
		// 833 + 1 GPUs = 678 nodes (1,000: 68; 250: 17). The scheduler's
		// spreading (least allocated) leaves partly used GPUs on every
		// node and takes 691 (70; 18), which placing every pod against
		// every node (the exhaustive scored check) also finds.
		withSetup("dynamicmig-250", migGroups, migPods(250, "gpu", "1g", "3g"), migSetup, 18),
		withSetup("dynamicmig-1000", migGroups, migPods(1000, "gpu", "1g", "3g"), migSetup, 70),
		withSetup("dynamicmig-10000", migGroups, migPods(10000, "gpu", "1g", "3g"), migSetup, 691),
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			pods := bc.pods()
			b.ReportAllocs()
			nodes := 0
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				snap := snapshot.New()
				snap.SetResourceClaimTemplate(oneGPUTemplate())
				if bc.setup != nil {
					bc.setup(snap)
				}
				p := newPlanner(b, snap, bc.groups()...)
				b.StartTimer()
				before := fx.ProcessCPU()
				plan, err := p.Plan(pods)
				cpu += fx.ProcessCPU() - before
				if err != nil {
					b.Fatal(err)
				}
				nodes = 0
				for _, su := range plan.ScaleUps {
					nodes += su.NewNodes
				}
				if nodes != bc.wantNodes || len(plan.NoScaleUp) != 0 {
					b.Fatalf("%s: %d nodes, %d pods left out (first: %v), want %d nodes and none left",
						bc.name, nodes, len(plan.NoScaleUp), first(plan.NoScaleUp), bc.wantNodes)
				}
			}
			b.ReportMetric(float64(nodes), "nodes")
			// CPU time (all threads, GC included) holds on a shared
			// machine, where wall time does not.
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

func first(n []NoScaleUp) any {
	if len(n) == 0 {
		return nil
	}
	return n[0]
}

// The mixed case: 20 groups (CPU-only, and 8-GPU groups published by DRA
// or a device plugin) and 30,000 pods of 5 shapes.
// least-waste grows a CPU group first (waste 0.5 against 0.625 for a DRA
// group holding everything): 6,000 CPU pods at 16 per node, then 48,000
// devices' worth of GPU pods at 8 devices per node.
const mixedWantNodes = 375 + 6000

func mixedGroups() []*nodegroup.NodeGroup {
	var gs []*nodegroup.NodeGroup
	for i := 0; i < 20; i++ {
		switch i % 4 {
		case 0:
			gs = append(gs, &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cpu-%02d", i)},
				Spec: nodegroup.Spec{MaxSize: 10000, Template: *fx.Node("t", 64, 256, nil)}})
		case 3:
			gs = append(gs, devicePluginGroup(fmt.Sprintf("dp-%02d", i), 8, 10000))
		default:
			gs = append(gs, draGroup(fmt.Sprintf("dra-%02d", i), 8, 10000))
		}
	}
	return gs
}

func mixedPods() []*v1.Pod {
	var pods []*v1.Pod
	pods = append(pods, replicas("cpu", 6000, 4000, nil)...)
	pods = append(pods, replicas("gpu1", 6000, 1000, fx.GPUs(fx.GPUResource, 1))...)
	pods = append(pods, replicas("gpu2", 6000, 1000, fx.GPUs(fx.GPUResource, 2))...)
	pods = append(pods, replicas("gpu4", 6000, 1000, fx.GPUs(fx.GPUResource, 4))...)
	pods = append(pods, claimPods("claim", 6000, 1000)...)
	return pods
}
