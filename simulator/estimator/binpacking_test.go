package estimator

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/scheduler/classes"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// nicDriver is a second DRA driver for groups with two pools per node.
const nicDriver = "nic.example.com"

var nicResource v1.ResourceName = "example.com/nic"

// group returns a node group whose template has cores CPUs and, when
// gpus > 0, one slice of that many GPUs (and nics NICs of a second driver).
func group(name string, cores int64, gpus, nics int) *nodegroup.NodeGroup {
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodegroup.Spec{MaxSize: 1000, Template: *fx.Node("template", cores, 256, nil)}}
	if gpus > 0 {
		g.Spec.ResourceSlices = append(g.Spec.ResourceSlices, fx.GPUSlice("x", gpus).Spec)
	}
	if nics > 0 {
		g.Spec.ResourceSlices = append(g.Spec.ResourceSlices, fx.DeviceSlice("x", nicDriver, nics, "nic").Spec)
	}
	return g
}

// newEngine returns a placement engine over a snapshot holding the classes that
// map example.com/gpu and example.com/nic.
func newEngine(t testing.TB) *placement.Engine {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	snap.SetDeviceClass(fx.Class("nic.example.com", nicDriver, nicResource, fx.Epoch))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// pods returns n pods named prefix-i, owned by one controller so they are
// of one kind, each asking for milliCPU and the extended resources.
func pods(prefix string, n int, milliCPU int64, extended v1.ResourceList) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		p := fx.Pod(fmt.Sprintf("%s-%d", prefix, i), milliCPU, extended)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: prefix,
			UID: types.UID("rs-" + prefix), Controller: ptr.To(true)}}
		out[i] = p
	}
	return out
}

func concat(lists ...[]*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func namer(group string, i int) string { return fmt.Sprintf("%s-new-%d", group, i) }

func TestBinPackingEstimate(t *testing.T) {
	gpu := fx.GPUResource
	implicit := classes.ImplicitName("gpu.example.com")
	tests := []struct {
		name         string
		group        *nodegroup.NodeGroup
		pods         []*v1.Pod
		maxNodes     int
		noNewNodeFor func(*v1.Pod) bool
		wantNodes    int
		wantPlaced   int
		// wantUnplacedErr is a substring of every unplaced pod's fit
		// error; "" means unplaced pods have none (node limit or held).
		wantUnplacedErr string
		wantHeld        int
		// wantDevicesPerNode, when set, is the number of devices each new
		// node has allocated, in node order.
		wantDevicesPerNode []int
	}{
		{
			name:       "CPU only: 20 one-core pods on 8-core nodes",
			group:      group("cpu", 8, 0, 0),
			pods:       pods("web", 20, 1000, nil),
			maxNodes:   10,
			wantNodes:  3,
			wantPlaced: 20,
		},
		{
			name:       "CPU only: two kinds share the last node",
			group:      group("cpu", 8, 0, 0),
			pods:       concat(pods("big", 3, 6000, nil), pods("small", 6, 1000, nil)),
			maxNodes:   10,
			wantNodes:  3,
			wantPlaced: 9,
		},
		{
			name:               "DRA: one-GPU pods fill 8-GPU nodes exactly",
			group:              group("gpu", 64, 8, 0),
			pods:               pods("train", 20, 100, fx.GPUs(gpu, 1)),
			maxNodes:           10,
			wantNodes:          3,
			wantPlaced:         20,
			wantDevicesPerNode: []int{8, 8, 4},
		},
		{
			name:               "DRA: three-GPU pods leave two GPUs per node",
			group:              group("gpu", 64, 8, 0),
			pods:               pods("train", 5, 100, fx.GPUs(gpu, 3)),
			maxNodes:           10,
			wantNodes:          3,
			wantPlaced:         5,
			wantDevicesPerNode: []int{6, 6, 3},
		},
		{
			name:               "DRA: implicit class name counts like the explicit one",
			group:              group("gpu", 64, 8, 0),
			pods:               pods("train", 10, 100, v1.ResourceList{implicit: fx.Count(4)}),
			maxNodes:           10,
			wantNodes:          5,
			wantPlaced:         10,
			wantDevicesPerNode: []int{8, 8, 8, 8, 8},
		},
		{
			name:               "DRA: small pods use the room big pods leave",
			group:              group("gpu", 64, 8, 0),
			pods:               concat(pods("big", 3, 100, fx.GPUs(gpu, 6)), pods("small", 6, 100, fx.GPUs(gpu, 1))),
			maxNodes:           10,
			wantNodes:          3,
			wantPlaced:         9,
			wantDevicesPerNode: []int{8, 8, 8},
		},
		{
			// Count-only regression: the last node of a run holds fewer
			// pods than its source; the other kind must still use it.
			name:       "DRA: another kind uses the room on the last node of a run",
			group:      group("gpu", 4, 2, 0),
			pods:       concat(pods("train", 9, 1700, fx.GPUs(gpu, 1)), pods("web", 2, 1000, nil)),
			maxNodes:   10,
			wantNodes:  5,
			wantPlaced: 11,
		},
		{
			name:       "DRA: two drivers, the scarcer device decides",
			group:      group("gpu", 64, 8, 2),
			pods:       pods("train", 6, 100, v1.ResourceList{gpu: fx.Count(1), nicResource: fx.Count(1)}),
			maxNodes:   10,
			wantNodes:  3,
			wantPlaced: 6,
		},
		{
			name:       "DRA: CPU runs out before devices",
			group:      group("gpu", 4, 8, 0),
			pods:       pods("train", 8, 2000, fx.GPUs(gpu, 1)),
			maxNodes:   10,
			wantNodes:  4,
			wantPlaced: 8,
		},
		{
			name:            "pod needs more GPUs than a node has",
			group:           group("gpu", 64, 8, 0),
			pods:            pods("giant", 3, 100, fx.GPUs(gpu, 9)),
			maxNodes:        10,
			wantNodes:       0,
			wantPlaced:      0,
			wantUnplacedErr: "fits none of 1 node(s)",
		},
		{
			name:            "pod needs more CPU than a node has",
			group:           group("cpu", 8, 0, 0),
			pods:            pods("giant", 2, 9000, nil),
			maxNodes:        10,
			wantNodes:       0,
			wantUnplacedErr: "Insufficient cpu",
		},
		{
			name:            "devices on a group without devices",
			group:           group("cpu", 64, 0, 0),
			pods:            pods("train", 2, 100, fx.GPUs(gpu, 1)),
			maxNodes:        10,
			wantNodes:       0,
			wantUnplacedErr: "fits none",
		},
		{
			name:            "too big pods do not stop the others",
			group:           group("gpu", 64, 8, 0),
			pods:            concat(pods("giant", 2, 100, fx.GPUs(gpu, 9)), pods("train", 4, 100, fx.GPUs(gpu, 2))),
			maxNodes:        10,
			wantNodes:       1,
			wantPlaced:      4,
			wantUnplacedErr: "fits none",
		},
		{
			name:       "max nodes stops the estimate",
			group:      group("gpu", 64, 8, 0),
			pods:       pods("train", 20, 100, fx.GPUs(gpu, 1)),
			maxNodes:   2,
			wantNodes:  2,
			wantPlaced: 16,
		},
		{
			name:       "max nodes zero places nothing",
			group:      group("cpu", 8, 0, 0),
			pods:       pods("web", 3, 1000, nil),
			maxNodes:   0,
			wantNodes:  0,
			wantPlaced: 0,
		},
		{
			name:         "held pods use room but open no node",
			group:        group("gpu", 64, 8, 0),
			pods:         concat(pods("train", 3, 100, fx.GPUs(gpu, 2)), pods("web", 5, 1000, nil)),
			maxNodes:     10,
			noNewNodeFor: func(p *v1.Pod) bool { return strings.HasPrefix(p.Name, "web") },
			wantNodes:    1,
			wantPlaced:   8,
		},
		{
			name:         "held pods with no room are reported held",
			group:        group("gpu", 2, 8, 0),
			pods:         concat(pods("train", 1, 1000, fx.GPUs(gpu, 2)), pods("web", 3, 1000, nil)),
			maxNodes:     10,
			noNewNodeFor: func(p *v1.Pod) bool { return strings.HasPrefix(p.Name, "web") },
			wantNodes:    1,
			wantPlaced:   2,
			wantHeld:     2,
		},
	}
	for _, tt := range tests {
		for _, countOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/countOnly=%v", tt.name, countOnly), func(t *testing.T) {
				h := newEngine(t)
				b := &BinPacking{Engine: h, Namer: namer, NoNewNodeFor: tt.noNewNodeFor, CountOnly: countOnly}
				res, err := b.Estimate(tt.group, tt.pods, tt.maxNodes)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.NewNodes) != tt.wantNodes || len(res.Placed) != tt.wantPlaced {
					t.Errorf("new nodes %d, placed %d; want %d, %d", len(res.NewNodes), len(res.Placed), tt.wantNodes, tt.wantPlaced)
				}
				if got := len(res.Placed) + len(res.Unplaced); got != len(tt.pods) {
					t.Errorf("placed + unplaced = %d, want every pod (%d) accounted for", got, len(tt.pods))
				}
				held := 0
				for _, u := range res.Unplaced {
					if u.Held {
						held++
					}
					switch {
					case tt.wantUnplacedErr == "" && u.Err != nil:
						t.Errorf("pod %s: unexpected fit error %v", u.Pod.Name, u.Err)
					case tt.wantUnplacedErr != "" && u.Err != nil && !strings.Contains(u.Err.Error(), tt.wantUnplacedErr):
						t.Errorf("pod %s: fit error %q, want it to contain %q", u.Pod.Name, u.Err, tt.wantUnplacedErr)
					case tt.wantUnplacedErr != "" && u.Err == nil:
						t.Errorf("pod %s: unplaced without a fit error, want %q", u.Pod.Name, tt.wantUnplacedErr)
					}
				}
				if held != tt.wantHeld {
					t.Errorf("held = %d, want %d", held, tt.wantHeld)
				}
				for i, n := range res.NewNodes {
					if want := namer(tt.group.Name, i); n != want {
						t.Errorf("new node %d named %s, want %s", i, n, want)
					}
				}
				if countOnly || tt.wantDevicesPerNode == nil {
					return
				}
				snap := h.Snapshot()
				for i, n := range res.NewNodes {
					if got := NodeUsage(snap, n).Requested.Devices; int(got) != tt.wantDevicesPerNode[i] {
						t.Errorf("node %s has %v devices allocated, want %d", n, got, tt.wantDevicesPerNode[i])
					}
				}
				if got, want := len(snap.AllocatedDeviceIDs()), sum(tt.wantDevicesPerNode); got != want {
					t.Errorf("%d distinct devices allocated, want %d", got, want)
				}
			})
		}
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// Replication copies a filled node: every pod of a long run is placed,
// once, on a node that exists in the snapshot, and its devices are real.
func TestBinPackingReplicatedNodesAreReal(t *testing.T) {
	h := newEngine(t)
	b := &BinPacking{Engine: h, Namer: namer}
	ps := pods("train", 64, 100, fx.GPUs(fx.GPUResource, 2))
	res, err := b.Estimate(group("gpu", 64, 8, 0), ps, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NewNodes) != 16 || len(res.Counted) != 0 {
		t.Fatalf("new nodes %d, counted %d; want 16 real nodes", len(res.NewNodes), len(res.Counted))
	}
	snap := h.Snapshot()
	perNode := map[string]int{}
	for _, p := range ps {
		_, node, ok := snap.Pod(p.UID)
		if !ok || node != res.Placed[p.UID] {
			t.Fatalf("pod %s: in snapshot on %q (%v), result says %q", p.Name, node, ok, res.Placed[p.UID])
		}
		perNode[node]++
	}
	for _, n := range res.NewNodes {
		if perNode[n] != 4 || NodeUsage(snap, n).Requested.Devices != 8 {
			t.Errorf("node %s: %d pods, %v devices; want 4 pods on 8 devices", n, perNode[n], NodeUsage(snap, n).Requested.Devices)
		}
	}
	if got := len(snap.AllocatedDeviceIDs()); got != 128 {
		t.Errorf("%d devices allocated, want 128", got)
	}
}

// CountOnly must give the node count of a full estimate: the planner
// compares groups by the former and executes the latter.
func TestCountOnlyMatchesFullEstimate(t *testing.T) {
	const cases = 80
	rng := rand.New(rand.NewSource(5004))
	for c := 0; c < cases; c++ {
		g, ps, maxNodes := randomCase(rng, c)
		t.Run(fmt.Sprintf("case-%d", c), func(t *testing.T) {
			h := newEngine(t)
			kinds := &Kinds{}
			estimate := func(countOnly bool) *Result {
				snap := h.Snapshot()
				snap.Fork()
				defer snap.Revert()
				res, err := (&BinPacking{Engine: h, Namer: namer, Kinds: kinds, CountOnly: countOnly}).Estimate(g, ps, maxNodes)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			full, counted := estimate(false), estimate(true)
			if len(full.NewNodes) != len(counted.NewNodes) || len(full.Placed) != len(counted.Placed) {
				t.Errorf("template %s, %d pods in %d kinds, max %d nodes: full estimate %d nodes / %d pods, count-only %d nodes / %d pods",
					describe(g), len(ps), countKinds(ps), maxNodes,
					len(full.NewNodes), len(full.Placed), len(counted.NewNodes), len(counted.Placed))
			}
		})
	}
}

// randomCase draws a template (CPU, GPUs, maybe NICs) and 1-4 kinds of
// pods in runs, interleaved at random.
func randomCase(rng *rand.Rand, c int) (*nodegroup.NodeGroup, []*v1.Pod, int) {
	cores := int64(4 + rng.Intn(29))
	gpus := []int{0, 2, 4, 8, 16}[rng.Intn(5)]
	nics := 0
	if gpus > 0 && rng.Intn(3) == 0 {
		nics = 1 + rng.Intn(4)
	}
	g := group(fmt.Sprintf("g%d", c), cores, gpus, nics)
	var runs [][]*v1.Pod
	for k, kinds := 0, 1+rng.Intn(4); k < kinds; k++ {
		extended := v1.ResourceList{}
		if gpus > 0 && rng.Intn(4) != 0 {
			extended[fx.GPUResource] = fx.Count(int64(1 + rng.Intn(gpus)))
		}
		if nics > 0 && rng.Intn(2) == 0 {
			extended[nicResource] = fx.Count(int64(1 + rng.Intn(nics)))
		}
		milliCPU := int64(100 + rng.Intn(int(cores*1000/2)))
		runs = append(runs, pods(fmt.Sprintf("k%d", k), 1+rng.Intn(30), milliCPU, extended))
	}
	var ps []*v1.Pod
	if rng.Intn(2) == 0 {
		for _, r := range runs { // kind after kind, as the planner sorts them
			ps = append(ps, r...)
		}
	} else {
		for len(runs) > 0 { // interleaved
			i := rng.Intn(len(runs))
			ps = append(ps, runs[i][0])
			if runs[i] = runs[i][1:]; len(runs[i]) == 0 {
				runs = append(runs[:i], runs[i+1:]...)
			}
		}
	}
	return g, ps, 1 + rng.Intn(40)
}

func describe(g *nodegroup.NodeGroup) string {
	cpu := g.Spec.Template.Status.Allocatable[v1.ResourceCPU]
	s := "cpu=" + cpu.String()
	for _, sl := range g.Spec.ResourceSlices {
		s += fmt.Sprintf(" %s=%d", sl.Driver, len(sl.Devices))
	}
	return s
}

func countKinds(ps []*v1.Pod) int {
	seen := map[string]bool{}
	for _, p := range ps {
		seen[EquivalenceKey(p)] = true
	}
	return len(seen)
}

// TestRoomBlocksSkipOnlyFullNodes: 70 pods of 3 CPUs leave each 4-CPU
// node one CPU; 70 pods of 1 CPU, each its own kind, must then fill those
// nodes in order, through blocks of nodes whose most-free summary was read
// when they had more room, and open none.
func TestRoomBlocksSkipOnlyFullNodes(t *testing.T) {
	eng := newEngine(t)
	var all []*v1.Pod
	for i := range 70 {
		all = append(all, fx.Pod(fmt.Sprintf("big-%d", i), 3000, nil))
	}
	for i := range 70 {
		p := fx.Pod(fmt.Sprintf("small-%d", i), 1000, nil)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(int64(i+1)<<20, resource.BinarySI) // each its own kind
		all = append(all, p)
	}
	est := &BinPacking{Engine: eng, Namer: func(g string, i int) string { return fmt.Sprintf("%s-%d", g, i) }}
	eng.Snapshot().Fork()
	defer eng.Snapshot().Revert()
	res, err := est.Estimate(group("g", 4, 0, 0), all, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NewNodes) != 70 || len(res.Placed) != 140 {
		t.Fatalf("%d new nodes for %d pods, want 70 for 140", len(res.NewNodes), len(res.Placed))
	}
	for i := range 70 {
		if got, want := res.Placed[all[70+i].UID], fmt.Sprintf("g-%d", i); got != want {
			t.Fatalf("small-%d went to %s, want %s", i, got, want)
		}
	}
}
