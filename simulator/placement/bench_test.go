package placement

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// BenchmarkPlace4000 places 4,000 one-GPU extended-resource pods onto 500
// nodes of 8 devices. A candidate cursor offers the node that last had room
// first, with the next one behind it, so each pod costs one scheduling cycle
// over a window of two nodes and the whole run stays linear in pods + nodes.
// (Offering all remaining nodes would make every cycle build the allocator
// over their slices.)
func BenchmarkPlace4000(b *testing.B) {
	const nodes, devices, pods, window = 500, 8, 4000, 2
	podList := make([]*v1.Pod, pods)
	for i := range podList {
		podList[i] = fx.Pod(fmt.Sprintf("p%d", i), 100, fx.GPUs(fx.GPUResource, 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		h := cluster(b, nodes, devices)
		names := h.snap.NodeNames()
		b.StartTimer()

		cursor := 0
		for i, pod := range podList {
			for {
				if cursor >= len(names) {
					b.Fatalf("pod %d fits no node", i)
				}
				end := min(cursor+window, len(names))
				node, _, ferr := h.PlaceOnAnyNode(pod, names[cursor:end])
				if ferr == nil {
					for names[cursor] != node {
						cursor++
					}
					break
				}
				cursor = end
			}
		}

		b.StopTimer()
		if got := len(h.snap.AllocatedDeviceIDs()); got != pods {
			b.Fatalf("allocated devices = %d, want %d", got, pods)
		}
		placed := 0
		for _, n := range names {
			placed += len(h.snap.NodeInfo(n).Pods)
		}
		if placed != pods {
			b.Fatalf("placed pods = %d, want %d", placed, pods)
		}
		b.StartTimer()
	}
}
