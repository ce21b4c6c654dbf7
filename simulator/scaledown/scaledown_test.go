package scaledown

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/drainability"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// spreadCluster builds `busy` nodes holding busyPods one-GPU pods each,
// then `light` nodes holding lightPods each; every node has 8 devices.
func spreadCluster(t testing.TB, busy, busyPods, light, lightPods int) *placement.Engine {
	t.Helper()
	return spreadClusterWith(t, busy, busyPods, light, lightPods, nil, nil)
}

// spreadClusterWith is spreadCluster with hooks that change each node and
// pod before they are added.
func spreadClusterWith(t testing.TB, busy, busyPods, light, lightPods int, nodeHook func(*v1.Node), podHook func(pod *v1.Pod, node string)) *placement.Engine {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	add := func(count, pods int, kind string) {
		for i := 0; i < count; i++ {
			name := fmt.Sprintf("%s-%04d", kind, i)
			node := fx.Node(name, 64, 256, nil)
			if nodeHook != nil {
				nodeHook(node)
			}
			if err := snap.AddNode(node); err != nil {
				t.Fatal(err)
			}
			if err := snap.AddResourceSlice(fx.GPUSlice(name, 8)); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < pods; j++ {
				pod := fx.Pod(fmt.Sprintf("p-%d", n), 100, fx.GPUs(fx.GPUResource, 1))
				n++
				if podHook != nil {
					podHook(pod, name)
				}
				if _, ferr := eng.Place(pod, name); ferr != nil {
					t.Fatal(ferr)
				}
			}
		}
	}
	add(busy, busyPods, "busy")
	add(light, lightPods, "light")
	return eng
}

func TestFindRemovesLightNodesAndKeepsDevicesExact(t *testing.T) {
	h := spreadCluster(t, 4, 4, 6, 2) // 16 free devices on busy nodes take 12 pods
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5})
	if len(removals) != 6 {
		t.Fatalf("removable nodes = %d (%v), want the 6 light ones; rejections: %v", len(removals), removals, rejections)
	}
	for _, r := range removals {
		if !strings.HasPrefix(r.Node, "light-") || len(r.Moves) != 2 {
			t.Errorf("removal %+v: want a light node moving 2 pods", r)
		}
	}
	snap := h.Snapshot()
	if snap.NodeCount() != 4 {
		t.Errorf("nodes left = %d, want 4", snap.NodeCount())
	}
	if got := snap.AllocatedDeviceIDs().Len(); got != 28 {
		t.Errorf("allocated devices = %d, want 28 (16 + 12 moved; freed devices released)", got)
	}
	// Moved pods go to the first node with room, as the drain tries nodes in order.
	want := map[string]int{"busy-0000": 8, "busy-0001": 8, "busy-0002": 8, "busy-0003": 4}
	for name, n := range want {
		if pods := len(snap.NodeInfo(name).Pods); pods != n {
			t.Errorf("node %s holds %d pods, want %d", name, pods, n)
		}
	}
}

func TestFindExplainsNodesThatStay(t *testing.T) {
	h := spreadCluster(t, 1, 7, 1, 2) // one free device cannot take two pods
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5})
	if len(removals) != 0 {
		t.Fatalf("removals = %+v, want none", removals)
	}
	reasons := map[string]string{}
	for _, r := range rejections {
		reasons[r.Node] = r.Reason
	}
	if !strings.Contains(reasons["busy-0000"], "utilization 0.88 is not below 0.50") {
		t.Errorf("busy node reason = %q", reasons["busy-0000"])
	}
	if !strings.Contains(reasons["light-0000"], "fits no other node") {
		t.Errorf("light node reason = %q", reasons["light-0000"])
	}
	if got := h.Snapshot().AllocatedDeviceIDs().Len(); got != 9 {
		t.Errorf("allocated devices after a failed drain = %d, want 9 (nothing lost)", got)
	}
}

// CA's drain rules decide which light node may go; each kept node says
// why with CA's reason names.
func TestFindAppliesDrainRules(t *testing.T) {
	replicated := func(pod *v1.Pod, node string) {
		pod.Labels = map[string]string{"node": node}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
	}
	onNode := func(target string, change func(*v1.Pod)) func(*v1.Pod, string) {
		return func(pod *v1.Pod, node string) {
			replicated(pod, node)
			if node == target {
				change(pod)
			}
		}
	}
	light0 := "light-0000"
	tests := []struct {
		name        string
		nodeHook    func(*v1.Node)
		podHook     func(*v1.Pod, string)
		pdbs        []*policyv1.PodDisruptionBudget
		wantRemoved []string
		wantCode    Code // rejection of light-0000
		wantReason  string
	}{
		{name: "replicated pods move", podHook: replicated, wantRemoved: []string{"light-0000", "light-0001"}},
		{name: "safe-to-evict false keeps its node",
			podHook:     onNode(light0, func(p *v1.Pod) { p.Annotations = map[string]string{drainability.SafeToEvictAnnotation: "false"} }),
			wantRemoved: []string{"light-0001"}, wantCode: "BlockedByPod", wantReason: "NotSafeToEvictAnnotation: pod annotated as not safe to evict present: p-6"},
		{name: "emptyDir keeps its node",
			podHook: onNode(light0, func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			}),
			wantRemoved: []string{"light-0001"}, wantCode: "BlockedByPod", wantReason: "LocalStorageRequested"},
		{name: "pod without controller keeps its node", podHook: onNode(light0, func(p *v1.Pod) { p.OwnerReferences = nil }),
			wantRemoved: []string{"light-0001"}, wantCode: "BlockedByPod", wantReason: "NotReplicated: default/p-6 is not replicated"},
		{name: "scale-down-disabled node stays", podHook: replicated,
			nodeHook: func(n *v1.Node) {
				if n.Name == light0 {
					n.Annotations = map[string]string{drainability.ScaleDownDisabledAnnotation: "true"}
				}
			},
			wantRemoved: []string{"light-0001"}, wantCode: "ScaleDownDisabledAnnotation", wantReason: "scale-down-disabled"},
		{name: "a PDB allowing one disruption lets one of two nodes go",
			podHook: func(p *v1.Pod, node string) { replicated(p, node); p.Labels["app"] = "web" },
			pdbs: []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "node": "light-0000"}}},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}}},
			wantRemoved: []string{"light-0001"}, wantCode: "BlockedByPod", wantReason: "NotEnoughPdb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := spreadClusterWith(t, 1, 6, 2, 1, tc.nodeHook, tc.podHook)
			removals, rejections := Find(h, Options{UtilizationThreshold: 0.5,
				Drainability: drainability.NewChecker(drainability.DefaultOptions(), tc.pdbs, time.Now())})
			var removed []string
			for _, r := range removals {
				removed = append(removed, r.Node)
			}
			if strings.Join(removed, ",") != strings.Join(tc.wantRemoved, ",") {
				t.Fatalf("removed %v, want %v; rejections %+v", removed, tc.wantRemoved, rejections)
			}
			if tc.wantCode == "" {
				return
			}
			for _, r := range rejections {
				if r.Node == light0 {
					if r.Code != tc.wantCode || !strings.Contains(r.Reason, tc.wantReason) {
						t.Errorf("rejection = %+v, want code %s and %q", r, tc.wantCode, tc.wantReason)
					}
					if n := len(h.Snapshot().NodeInfo(light0).Pods); n != 1 {
						t.Errorf("kept node holds %d pods in the snapshot, want its 1", n)
					}
					return
				}
			}
			t.Errorf("no rejection for %s: %+v", light0, rejections)
		})
	}
}

// Batch budget: two nodes each with one pod of a PDB allowing one
// disruption: only the first node goes.
func TestFindSharesPDBBudgetAcrossBatch(t *testing.T) {
	h := spreadClusterWith(t, 1, 6, 2, 1, nil, func(p *v1.Pod, node string) {
		p.Labels = map[string]string{"app": "web"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}
	})
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5,
		Drainability: drainability.NewChecker(drainability.DefaultOptions(), []*policyv1.PodDisruptionBudget{pdb}, time.Now())})
	if len(removals) != 1 || removals[0].Node != "light-0000" {
		t.Fatalf("removals = %+v, want light-0000 only; rejections %+v", removals, rejections)
	}
	for _, r := range rejections {
		if r.Node == "light-0001" && r.Blocked != nil && r.Blocked.PodReason == drainability.NotEnoughPdb {
			return
		}
	}
	t.Errorf("light-0001 not rejected with NotEnoughPdb: %+v", rejections)
}

func BenchmarkScaleDown(b *testing.B) {
	b.Run("800-nodes", func(b *testing.B) {
		b.ReportAllocs()
		found := 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			h := spreadCluster(b, 320, 4, 480, 2)
			b.StartTimer()
			removals, _ := Find(h, Options{UtilizationThreshold: 0.5})
			found = len(removals)
			if found != 480 {
				b.Fatalf("removable = %d, want 480", found)
			}
		}
		b.ReportMetric(float64(found), "removable")
	})
}

// Expendable pods (priority below --expendable-pods-priority-cutoff) do
// not keep their node: they are evicted with no place elsewhere, as CA
// treats them. Pods with no priority, or at the cutoff, still must fit.
func TestFindIgnoresExpendablePods(t *testing.T) {
	cutoff := int32(-10)
	for _, tc := range []struct {
		name     string
		priority *int32
		cutoff   *int32
		removed  bool
	}{
		{"below the cutoff", ptr.To(int32(-11)), &cutoff, true},
		{"at the cutoff", ptr.To(int32(-10)), &cutoff, false},
		{"no priority", nil, &cutoff, false},
		{"no cutoff", ptr.To(int32(-11)), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One free device on the busy node cannot take the light
			// node's two pods.
			h := spreadClusterWith(t, 1, 7, 1, 2, nil, func(pod *v1.Pod, node string) {
				if strings.HasPrefix(node, "light-") {
					pod.Spec.Priority = tc.priority
				}
			})
			removals, rejections := Find(h, Options{UtilizationThreshold: 0.5, ExpendablePodsPriorityCutoff: tc.cutoff})
			removed := len(removals) == 1 && removals[0].Node == "light-0000" && len(removals[0].Moves) == 0
			if removed != tc.removed {
				t.Fatalf("removals %+v (rejections %+v), want light-0000 removed: %v", removals, rejections, tc.removed)
			}
			if tc.removed {
				if got := h.Snapshot().AllocatedDeviceIDs().Len(); got != 7 {
					t.Errorf("allocated devices = %d, want 7: the expendable pods' devices are freed", got)
				}
			}
		})
	}
}

// CA's --ignore-daemonsets-utilization and --ignore-mirror-pods-utilization
// leave those pods out of both sides of a node's CPU utilization: a 4-CPU
// node with a 1.5-CPU DaemonSet (or mirror) pod and a 0.5-CPU workload is
// 0.5 used, or 0.5 of 2.5 (0.2) with the flag.
func TestUtilizationIgnores(t *testing.T) {
	daemonSet := func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
	}
	mirror := func(p *v1.Pod) { p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"} }
	for _, tc := range []struct {
		name      string
		agentCPU  int64 // millicores of the DaemonSet or mirror pod
		workCPU   int64 // of the workload pod; 0: none
		agent     func(*v1.Pod)
		ignore    UtilizationIgnores
		want      float64
		removable bool
	}{
		{"DaemonSet pod counted", 1500, 500, daemonSet, UtilizationIgnores{}, 0.5, false},
		{"DaemonSet pod ignored", 1500, 500, daemonSet, UtilizationIgnores{DaemonSetPods: true}, 0.2, true},
		{"mirror pod counted with DaemonSets ignored", 1500, 500, mirror, UtilizationIgnores{DaemonSetPods: true}, 0.5, false},
		{"mirror pod ignored", 1500, 500, mirror, UtilizationIgnores{MirrorPods: true}, 0.2, true},
		{"the rest of the node is full", 3500, 500, daemonSet, UtilizationIgnores{DaemonSetPods: true}, 1, false},
		{"only the ignored pod, filling the node, is idle", 4000, 0, daemonSet, UtilizationIgnores{DaemonSetPods: true}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			eng, err := placement.New(context.Background(), snap, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []*v1.Node{fx.Node("small", 4, 64, nil), fx.Node("big", 64, 256, nil)} {
				if err := snap.AddNode(n); err != nil {
					t.Fatal(err)
				}
			}
			agent := fx.Pod("agent", tc.agentCPU, nil)
			tc.agent(agent)
			pods := []*v1.Pod{agent}
			if tc.workCPU > 0 {
				pods = append(pods, fx.Pod("work", tc.workCPU, nil))
			}
			for _, p := range pods {
				if _, ferr := eng.Place(p, "small"); ferr != nil {
					t.Fatal(ferr)
				}
			}
			if got, _ := UtilizationOf(eng, "small", tc.ignore); got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("utilization %v, want %v", got, tc.want)
			}
			removals, rejections := Find(eng, Options{UtilizationThreshold: 0.5, Ignore: tc.ignore,
				MayRemove: func(n *v1.Node) bool { return n.Name == "small" }})
			if removed := len(removals) == 1 && removals[0].Node == "small"; removed != tc.removable {
				t.Fatalf("removals %+v, rejections %+v; want small removable: %v", removals, rejections, tc.removable)
			}
		})
	}
}

// migCluster builds DynamicMIG H100 nodes (8 GPUs each); each node takes
// pods of whole GPUs and pods of one 1g.10gb partition.
func migCluster(t *testing.T, nodes map[string][2]int) *placement.Engine {
	t.Helper()
	snap := snapshot.New()
	for _, c := range fx.NVIDIAClasses() {
		snap.SetDeviceClass(c)
	}
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("whole-gpu", "gpu.nvidia.com", 1))
	small := fx.ClaimTemplate("mig-1g", "mig.nvidia.com", 1)
	small.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`}}}
	snap.SetResourceClaimTemplate(small)
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := snap.AddNode(fx.H100Node(name)); err != nil {
			t.Fatal(err)
		}
		for _, s := range fx.NVIDIADynamicMIG(name, 8) {
			if err := snap.AddResourceSlice(s); err != nil {
				t.Fatal(err)
			}
		}
		for i := range nodes[name][0] {
			pod := fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("%s-whole-%d", name, i), 100, nil), "gpu", "whole-gpu")
			if _, ferr := eng.Place(pod, name); ferr != nil {
				t.Fatal(ferr)
			}
		}
		for i := range nodes[name][1] {
			pod := fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("%s-mig-%d", name, i), 100, nil), "gpu", "mig-1g")
			if _, ferr := eng.Place(pod, name); ferr != nil {
				t.Fatal(ferr)
			}
		}
	}
	return eng
}

// On DynamicMIG nodes utilization is read from the counters: all 8 GPUs
// taken whole is 100% (not 8 of 160 devices), 4 of 8 is 50%, one 1g.10gb
// partition is an eighth of the memory slices. Only the light node goes,
// its partition moving to the half-used node.
func TestFindCountsPartitionedGPUsByCounters(t *testing.T) {
	h := migCluster(t, map[string][2]int{"full": {8, 0}, "half": {4, 0}, "light": {0, 1}})
	for node, want := range map[string]float64{"full": 1, "half": 0.5, "light": 0.125} {
		if u, devices := UtilizationOf(h, node, UtilizationIgnores{}); u != want || !devices {
			t.Errorf("%s: utilization %.3f (on devices: %t), want %.3f on devices", node, u, devices, want)
		}
	}
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5})
	if len(removals) != 1 || removals[0].Node != "light" || removals[0].Moves["default/light-mig-0"] != "half" {
		t.Errorf("removals %+v, want light with its pod moving to half", removals)
	}
	got := map[string]string{}
	for _, r := range rejections {
		got[r.Node] = string(r.Code) + ": " + r.Reason
	}
	if got["full"] != "NotUnderutilized: utilization 1.00 is not below 0.50" {
		t.Errorf("full node: %q, want NotUnderutilized at 1.00", got["full"])
	}
}

// Pods whose claims are their own (named and reserved for the pod alone,
// or generated from a template and owned by it) move with their claims:
// 5 nodes of 10 devices running 4 such pods each fit on 2 nodes, so the
// first 3 go, and every moved pod's own claim is allocated again on the
// node it moved to, one device each, none shared.
func TestFindMovesPodsWithClaimsOfTheirOwn(t *testing.T) {
	for _, generated := range []bool{false, true} {
		t.Run(fmt.Sprintf("generated=%t", generated), func(t *testing.T) {
			h := claimCluster(t, 5, generated)
			removals, rejections := Find(h, Options{UtilizationThreshold: 0.5})
			var removed []string
			for _, r := range removals {
				removed = append(removed, r.Node)
			}
			if want := []string{"node-00000", "node-00001", "node-00002"}; !slices.Equal(removed, want) {
				t.Fatalf("removed %v, want %v; rejections %+v", removed, want, rejections)
			}
			kept := map[string]Code{}
			for _, r := range rejections {
				kept[r.Node] = r.Code
			}
			if kept["node-00003"] != NoPlaceToMovePods || kept["node-00004"] != NoPlaceToMovePods {
				t.Errorf("rejections %+v, want node-00003 and node-00004 kept with NoPlaceToMovePods (the others are full)", rejections)
			}
			snap := h.Snapshot()
			devices := map[string]string{}
			for _, node := range []string{"node-00003", "node-00004"} {
				ni := snap.NodeInfo(node)
				if len(ni.Pods) != 10 {
					t.Errorf("%s holds %d pods, want 10", node, len(ni.Pods))
				}
				for _, pi := range ni.Pods {
					claims := h.ClaimsOf(pi.GetPod())
					if len(claims) != 1 || claims[0].Status.Allocation == nil {
						t.Fatalf("pod %s on %s: claims %v, want its own, allocated", pi.GetPod().Name, node, claims)
					}
					res := claims[0].Status.Allocation.Devices.Results
					if len(res) != 1 || res[0].Pool != node {
						t.Fatalf("pod %s on %s holds %+v, want one device of its node", pi.GetPod().Name, node, res)
					}
					if other, dup := devices[node+"/"+res[0].Device]; dup {
						t.Errorf("device %s/%s held by %s and %s", node, res[0].Device, other, pi.GetPod().Name)
					}
					devices[node+"/"+res[0].Device] = pi.GetPod().Name
				}
			}
			if got := snap.AllocatedDeviceIDs().Len(); got != 20 {
				t.Errorf("allocated devices = %d, want 20", got)
			}
		})
	}
}

// A pod with pod affinity can fit a target later, once the pod it needs
// has moved there, so what a target rejected is not remembered for it:
// c1's pod (affinity to app=y) cannot go to t1, which has no app=y pod,
// and takes t2's last room; c2's app=y pod then moves to t1, where c3's
// pod, alike c1's, now fits.
func TestFindRetriesTargetsForPodsWithAffinity(t *testing.T) {
	snap := snapshot.New()
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	withY := func(p *v1.Pod) *v1.Pod {
		p.Labels = map[string]string{"app": "y"}
		return p
	}
	needsY := func(p *v1.Pod) *v1.Pod {
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "y"}}, TopologyKey: "kubernetes.io/hostname"}}}}
		return p
	}
	for _, node := range []string{"t1", "t2", "c1", "c2", "c3"} {
		if err := snap.AddNode(fx.Node(node, 4, 64, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for node, pods := range map[string][]*v1.Pod{
		"t1": {fx.Pod("t1-filler", 2000, nil)},
		"t2": {withY(fx.Pod("t2-y", 2000, nil)), fx.Pod("t2-filler", 1000, nil)},
		"c1": {needsY(fx.Pod("p1", 1000, nil))},
		"c2": {withY(fx.Pod("y", 1000, nil))},
		"c3": {needsY(fx.Pod("p2", 1000, nil))},
	} {
		for _, p := range pods {
			p.Spec.NodeName = node
			if err := snap.AddPod(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	removals, rejections := Find(eng, Options{UtilizationThreshold: 0.5,
		MayRemove: func(n *v1.Node) bool { return strings.HasPrefix(n.Name, "c") }})
	got := map[string]string{}
	for _, r := range removals {
		for pod, to := range r.Moves {
			got[pod] = to
		}
	}
	want := map[string]string{"default/p1": "t2", "default/y": "t1", "default/p2": "t1"}
	if len(removals) != 3 || !maps.Equal(got, want) {
		t.Errorf("removals %+v (rejections %+v), want c1, c2, c3 removed with moves %v", removals, rejections, want)
	}
}

// Two pods sharing a claim leave their node together: the claim is freed
// and allocated again, once, on the node they both move to.
func TestFindMovesPodsSharingAClaimTogether(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"busy", "light"} {
		if err := snap.AddNode(fx.Node(node, 64, 256, nil)); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(node, 8)); err != nil {
			t.Fatal(err)
		}
	}
	place := func(pod *v1.Pod, claim, node string) {
		if snap.ResourceClaim("default", claim) == nil {
			snap.SetResourceClaim(fx.Claim(claim, "gpu.example.com", 1))
		}
		if _, ferr := eng.Place(fx.WithClaim(pod, "gpu", claim), node); ferr != nil {
			t.Fatal(ferr)
		}
	}
	for i := range 6 {
		place(fx.Pod(fmt.Sprintf("busy-%d", i), 100, nil), fmt.Sprintf("busy-%d-gpu", i), "busy")
	}
	place(fx.Pod("a", 100, nil), "shared", "light")
	place(fx.Pod("b", 100, nil), "shared", "light")
	removals, rejections := Find(eng, Options{UtilizationThreshold: 0.5})
	if len(removals) != 1 || removals[0].Node != "light" ||
		!maps.Equal(removals[0].Moves, map[string]string{"default/a": "busy", "default/b": "busy"}) {
		t.Fatalf("removals %+v (rejections %+v), want light removed, a and b moving to busy", removals, rejections)
	}
	claim := snap.ResourceClaim("default", "shared")
	if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Pool != "busy" || len(claim.Status.ReservedFor) != 2 {
		t.Errorf("shared claim status %+v, want one device of busy reserved for a and b", claim.Status)
	}
	if got := snap.AllocatedDeviceIDs().Len(); got != 7 {
		t.Errorf("allocated devices = %d, want 7", got)
	}
}

// An early stop keeps the search to MaxUnneeded removals, last loop's
// unneeded nodes first whatever their use, and says of each candidate
// left why it was not looked at; the snapshot holds only the chosen
// removals.
func TestFindStopsEarly(t *testing.T) {
	h := spreadClusterWith(t, 4, 4, 6, 2, nil, func(pod *v1.Pod, node string) {
		if node == "light-0005" {
			pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
		}
	})
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5, Stop: EarlyStop{
		MaxUnneeded: 2, Reason: "enough found", Previously: map[string]bool{"light-0005": true}}})
	var got []string
	for _, r := range removals {
		got = append(got, r.Node)
	}
	if strings.Join(got, ",") != "light-0005,light-0000" {
		t.Fatalf("removals = %v, want light-0005 (unneeded last loop) then light-0000", got)
	}
	var skipped []string
	for _, r := range rejections {
		if r.Code == NotEvaluated {
			if r.Reason != "enough found" {
				t.Errorf("%s: reason %q", r.Node, r.Reason)
			}
			skipped = append(skipped, r.Node)
		}
	}
	if len(skipped) != 4 {
		t.Errorf("not evaluated = %v, want the 4 other light nodes", skipped)
	}
	if n := h.Snapshot().NodeCount(); n != 8 {
		t.Errorf("nodes left in the snapshot = %d, want 8", n)
	}
}

// Pods drained off a node go to nodes that stay: onto a candidate drained
// later they would move again with it, and its drain would then carry
// them too.
func TestDrainedPodsMoveOnceToNodesThatStay(t *testing.T) {
	h := spreadCluster(t, 0, 0, 4, 3) // four nodes at 3 of 8 devices: room for two drains
	removals, rejections := Find(h, Options{UtilizationThreshold: 0.5})
	removed := map[string]bool{}
	for _, r := range removals {
		removed[r.Node] = true
	}
	if got := slices.Sorted(maps.Keys(removed)); !slices.Equal(got, []string{"light-0000", "light-0001"}) {
		t.Fatalf("removed %v, want the first two candidates; rejections: %v", got, rejections)
	}
	for _, r := range removals {
		if len(r.Moves) != 3 {
			t.Errorf("node %s moves %d pods (%v), want its own 3 only", r.Node, len(r.Moves), r.Moves)
		}
		for pod, to := range r.Moves {
			if removed[to] {
				t.Errorf("pod %s of node %s moves to %s, which is removed too", pod, r.Node, to)
			}
		}
	}
}
