package snapshot_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

const (
	netDriver                   = "net.example.com"
	netResource v1.ResourceName = "example.com/net"
)

// sharedSlice is a slice not local to one node: allNodes when selector is
// nil, else available on the nodes the selector picks.
func sharedSlice(name, pool string, index, count, devices int, selector *v1.NodeSelector) *resourceapi.ResourceSlice {
	s := fx.DeviceSlice("unused", netDriver, devices, fmt.Sprintf("%s-%d", pool, index))
	s.Name = name
	s.Spec.NodeName = nil
	s.Spec.Pool = resourceapi.ResourcePool{Name: pool, ResourceSliceCount: int64(count)}
	if selector == nil {
		s.Spec.AllNodes = ptr.To(true)
	} else {
		s.Spec.NodeSelector = selector
	}
	return s
}

func rackSelector(rack string) *v1.NodeSelector {
	return &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{rack}}}}}}
}

// world is one randomized cluster and the pods that will be scheduled on it.
type world struct {
	h     *placement.Engine
	nodes []string
	pods  []*v1.Pod
}

// newWorld builds the same cluster for the same rng state: nodes in two
// racks, some with node-local GPUs; a two-slice allNodes pool and a
// per-rack nodeSelector pool of network devices; classes for both.
func newWorld(t *testing.T, rng *rand.Rand, scoped bool, profile *config.KubeSchedulerProfile) *world {
	t.Helper()
	snap := snapshot.New()
	if !scoped {
		snapshot.DisableCycleScope(snap)
	}
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	snap.SetDeviceClass(fx.Class("net.example.com", netDriver, netResource, fx.Epoch))
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("net-pair", "net.example.com", 2))
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("gpu-one", "gpu.example.com", 1))
	w := &world{}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, n := 0, 3+rng.Intn(6); i < n; i++ {
		name := fmt.Sprintf("node-%d", i)
		node := fx.Node(name, int64(4+rng.Intn(13)), 64, nil)
		node.Labels["rack"] = []string{"a", "b"}[rng.Intn(2)]
		must(snap.AddNode(node))
		if gpus := rng.Intn(9); gpus > 0 {
			must(snap.AddResourceSlice(fx.GPUSlice(name, gpus)))
		}
		w.nodes = append(w.nodes, name)
	}
	must(snap.AddResourceSlice(sharedSlice("fabric-0", "fabric", 0, 2, 1+rng.Intn(4), nil)))
	must(snap.AddResourceSlice(sharedSlice("fabric-1", "fabric", 1, 2, 1+rng.Intn(4), nil)))
	for _, rack := range []string{"a", "b"} {
		if rng.Intn(3) > 0 {
			must(snap.AddResourceSlice(sharedSlice("rack-"+rack, "rack-"+rack, 0, 1, 1+rng.Intn(6), rackSelector(rack))))
		}
	}
	for i, n := 0, 20+rng.Intn(25); i < n; i++ {
		extended := v1.ResourceList{}
		if g := rng.Intn(5); g > 0 {
			extended[fx.GPUResource] = fx.Count(int64(g))
		}
		if k := rng.Intn(4); k > 0 && rng.Intn(2) == 0 {
			extended[netResource] = fx.Count(int64(k))
		}
		pod := fx.Pod(fmt.Sprintf("pod-%d", i), int64(100+rng.Intn(4000)), extended)
		switch rng.Intn(6) {
		case 0:
			fx.WithTemplateClaim(pod, "net", "net-pair")
		case 1:
			fx.WithTemplateClaim(pod, "gpu", "gpu-one")
		}
		w.pods = append(w.pods, pod)
	}
	eng, err := placement.New(context.Background(), snap, profile)
	must(err)
	w.h = eng
	return w
}

// play schedules the pods in order, each through PlaceBest on all nodes
// or PlaceOnAnyNode on a random subset (sometimes naming a node twice),
// and removes a placed pod now and then. It returns one line per step.
func (w *world) play(rng *rand.Rand) []string {
	var log []string
	var placed []*v1.Pod
	for _, pod := range w.pods {
		if len(placed) > 0 && rng.Intn(6) == 0 {
			i := rng.Intn(len(placed))
			_, err := w.h.Remove(placed[i].UID)
			log = append(log, fmt.Sprintf("remove %s: %v", placed[i].Name, err))
			placed = append(placed[:i], placed[i+1:]...)
		}
		var node string
		var got *v1.Pod
		var ferr *placement.FitError
		if rng.Intn(2) == 0 {
			node, got, ferr = w.h.PlaceBest(pod, w.nodes)
		} else {
			var candidates []string
			for _, n := range w.nodes {
				if rng.Intn(2) == 0 {
					candidates = append(candidates, n)
				}
			}
			if len(candidates) > 0 && rng.Intn(4) == 0 {
				candidates = append(candidates, candidates[0])
			}
			node, got, ferr = w.h.PlaceOnAnyNode(pod, candidates)
		}
		if ferr != nil {
			log = append(log, fmt.Sprintf("%s: %v", pod.Name, ferr))
			continue
		}
		placed = append(placed, got)
		log = append(log, fmt.Sprintf("%s -> %s %v", pod.Name, node, w.devices(got)))
	}
	var all []string
	for id := range w.h.Snapshot().AllocatedDeviceIDs() {
		all = append(all, id.String())
	}
	slices.Sort(all)
	return append(log, "allocated: "+strings.Join(all, " "))
}

func (w *world) devices(pod *v1.Pod) []string {
	var out []string
	for _, c := range w.h.ClaimsOf(pod) {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out = append(out, fmt.Sprintf("%s/%s/%s", r.Driver, r.Pool, r.Device))
		}
	}
	slices.Sort(out)
	return out
}

// The scoped DRA listers (scope.go) must change only the cost of a
// placement, never its outcome: same node, same devices, same errors.
// Under kube-scheduler's default profile and under one that scores the
// devices too (as draxr's deployment does: NodeResourcesFit then counts
// each scored node's devices from the slice list).
func TestScopedListersPlaceLikeUnscoped(t *testing.T) {
	devicesScored, err := placement.ParseProfile([]byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 1}
        - {name: `+string(fx.GPUResource)+`, weight: 5}
        - {name: `+string(netResource)+`, weight: 3}
`), "devices scored", "")
	if err != nil {
		t.Fatal(err)
	}
	const cases = 60
	for c := 0; c < cases; c++ {
		seed := int64(1000 + c)
		profile, name := (*config.KubeSchedulerProfile)(nil), "default"
		if c%2 == 1 {
			profile, name = devicesScored, "devices-scored"
		}
		t.Run(fmt.Sprintf("seed-%d-%s", seed, name), func(t *testing.T) {
			var logs [2][]string
			for i, scoped := range []bool{true, false} {
				rng := rand.New(rand.NewSource(seed))
				logs[i] = newWorld(t, rng, scoped, profile).play(rng)
			}
			placedSome := false
			for i := range logs[0] {
				if i >= len(logs[1]) || logs[0][i] != logs[1][i] {
					t.Fatalf("step %d differs:\n  scoped:   %s\n  unscoped: %s", i, logs[0][i], at(logs[1], i))
				}
				placedSome = placedSome || strings.Contains(logs[0][i], " -> ")
			}
			if len(logs[0]) != len(logs[1]) {
				t.Fatalf("scoped run has %d steps, unscoped %d", len(logs[0]), len(logs[1]))
			}
			if !placedSome {
				t.Fatalf("no pod was placed; the case checks nothing:\n%s", strings.Join(logs[0], "\n"))
			}
		})
	}
}

func at(log []string, i int) string {
	if i < len(log) {
		return log[i]
	}
	return "(none)"
}

// The switch itself: with scoping off, the listers return every slice even
// while a cycle scope is set.
func TestDisableCycleScope(t *testing.T) {
	for _, scoped := range []bool{true, false} {
		t.Run(fmt.Sprintf("scoped=%v", scoped), func(t *testing.T) {
			snap := snapshot.New()
			if !scoped {
				snapshot.DisableCycleScope(snap)
			}
			for _, n := range []string{"a", "b"} {
				if err := snap.AddNode(fx.Node(n, 4, 4, nil)); err != nil {
					t.Fatal(err)
				}
				if err := snap.AddResourceSlice(fx.GPUSlice(n, 1)); err != nil {
					t.Fatal(err)
				}
			}
			snap.SetCycleScope("pod", []string{"a"})
			defer snap.ClearCycleScope()
			got, err := snap.ResourceSlices().ListWithDeviceTaintRules()
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			if !scoped {
				want = 2
			}
			if len(got) != want {
				t.Errorf("listed %d slices, want %d", len(got), want)
			}
		})
	}
}
