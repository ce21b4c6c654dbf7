package placement

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		percentage *int32
		noScore    bool
		nodes      int
		want       int
	}{
		{name: "small cluster: every node", nodes: 99, want: 99},
		{name: "100 nodes: the floor of 100", nodes: 100, want: 100},
		{name: "adaptive at 300 nodes: 48%", nodes: 300, want: 144},
		{name: "adaptive at 1,000 nodes: 42%", nodes: 1000, want: 420},
		{name: "adaptive at 5,000 nodes: 10%", nodes: 5000, want: 500},
		{name: "adaptive at 6,000 nodes: at least 5%", nodes: 6000, want: 300},
		{name: "profile's 10% under the floor", percentage: ptr.To[int32](10), nodes: 500, want: 100},
		{name: "profile's 70%", percentage: ptr.To[int32](70), nodes: 1000, want: 700},
		{name: "profile's 100%", percentage: ptr.To[int32](100), nodes: 5000, want: 5000},
		{name: "no Score plugins: the first feasible", noScore: true, nodes: 5000, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.percentage != nil {
				body = fmt.Sprintf("  percentageOfNodesToScore: %d\n", *tc.percentage)
			}
			if tc.noScore {
				body += "  plugins:\n    score:\n      disabled: [{name: '*'}]\n"
			}
			h := parseProfile(t, body)
			if got := h.numFeasibleNodesToFind(tc.nodes); got != tc.want {
				t.Errorf("numFeasibleNodesToFind(%d) = %d, want %d", tc.nodes, got, tc.want)
			}
		})
	}
}

// scanFleet is 300 nodes with 32 of 64 cores taken, but for node-050
// (16 taken) and node-250 (none): the emptiest node is past the 144
// feasible nodes kube-scheduler searches from the first node.
func scanFleet(t *testing.T, h *Engine, snap *snapshot.Snapshot) []string {
	t.Helper()
	var nodes []string
	for i := range 300 {
		name := fmt.Sprintf("node-%03d", i)
		addNode(t, snap, name, nil)
		nodes = append(nodes, name)
		used := map[int]int64{50: 16000, 250: 0}
		milli, ok := used[i]
		if !ok {
			milli = 32000
		}
		if milli > 0 {
			mustPlace(t, h, fx.Pod("running-"+name, milli, nil), name)
		}
	}
	return nodes
}

func TestPlaceBestScannedStopsWhereTheSchedulerDoes(t *testing.T) {
	snap := snapshot.New()
	h := newEngine(t, snap)
	nodes := scanFleet(t, h, snap)
	scan := h.NewNodeScan(nodes)
	// The first search sees node-000..node-143; the next starts at node-144.
	for i, want := range []string{"node-050", "node-250"} {
		node, _, ferr := h.PlaceBestScanned(fx.Pod(fmt.Sprintf("p%d", i), 100, nil), "small", nodes, scan)
		if ferr != nil {
			t.Fatal(ferr)
		}
		if node != want {
			t.Errorf("pod %d went to %s, want %s", i, node, want)
		}
	}
	// Candidates left out (no room) still count as examined: with
	// node-000..node-049 full and left out, the third search runs from
	// node-288, wraps, and finds its 144th feasible node at node-181.
	for _, n := range nodes[:50] {
		mustPlace(t, h, fx.Pod("filler-"+n, 32000, nil), n)
	}
	node, _, ferr := h.PlaceBestScanned(fx.Pod("p2", 100, nil), "small", nodes[50:], scan)
	if ferr != nil || node != "node-050" {
		t.Errorf("third pod went to %s (%v), want node-050", node, ferr)
	}
	if scan.next != 182 {
		t.Errorf("next search starts at %d, want 182 (after node-181)", scan.next)
	}
	// Unbounded, the emptiest node wins.
	node, _, ferr = h.PlaceBest(fx.Pod("unbounded", 100, nil), nodes)
	if ferr != nil || node != "node-250" {
		t.Errorf("PlaceBest chose %s (%v), want node-250", node, ferr)
	}
}

// The configuration's percentageOfNodesToScore applies to a profile that
// sets none.
func TestPercentageOfNodesToScoreFromTheConfiguration(t *testing.T) {
	profile, err := ParseProfile([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
		"percentageOfNodesToScore: 100\nprofiles:\n- schedulerName: default-scheduler\n"), "test", "")
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot.New()
	h, err := New(context.Background(), snap, profile)
	if err != nil {
		t.Fatal(err)
	}
	nodes := scanFleet(t, h, snap)
	node, _, ferr := h.PlaceBestScanned(fx.Pod("p", 100, nil), "small", nodes, h.NewNodeScan(nodes))
	if ferr != nil || node != "node-250" {
		t.Errorf("pod went to %s (%v), want node-250 (every node scored)", node, ferr)
	}
}
