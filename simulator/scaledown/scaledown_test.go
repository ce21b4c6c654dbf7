package scaledown

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/harness"
	"draxr.dev/draxr/simulator/snapshot"
)

// spreadCluster builds `busy` nodes holding busyPods one-GPU pods each,
// then `light` nodes holding lightPods each; every node has 8 devices.
func spreadCluster(t testing.TB, busy, busyPods, light, lightPods int) *harness.Harness {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	h, err := harness.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	add := func(count, pods int, kind string) {
		for i := 0; i < count; i++ {
			name := fmt.Sprintf("%s-%04d", kind, i)
			if err := snap.AddNode(fx.Node(name, 64, 256, nil)); err != nil {
				t.Fatal(err)
			}
			if err := snap.AddResourceSlice(fx.GPUSlice(name, 8)); err != nil {
				t.Fatal(err)
			}
			for j := 0; j < pods; j++ {
				pod := fx.Pod(fmt.Sprintf("p-%d", n), 100, fx.GPUs(fx.GPUResource, 1))
				n++
				if _, ferr := h.Place(pod, name); ferr != nil {
					t.Fatal(ferr)
				}
			}
		}
	}
	add(busy, busyPods, "busy")
	add(light, lightPods, "light")
	return h
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

func TestMovableVeto(t *testing.T) {
	h := spreadCluster(t, 1, 2, 1, 1)
	_, rejections := Find(h, Options{UtilizationThreshold: 0.5, Movable: func(p *v1.Pod) error {
		return fmt.Errorf("PodDisruptionBudget allows no disruption")
	}})
	found := false
	for _, r := range rejections {
		found = found || strings.Contains(r.Reason, "cannot be evicted: PodDisruptionBudget allows no disruption")
	}
	if !found {
		t.Fatalf("rejections = %+v, want the PDB veto", rejections)
	}
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
