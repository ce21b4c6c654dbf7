package placement

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

const profileHead = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
`

func parseProfile(t *testing.T, body string) *Engine {
	t.Helper()
	profile, err := ParseProfile([]byte(profileHead+body), "test", "")
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), snapshot.New(), profile)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type noRoomCase struct {
	name     string
	pod      *v1.Pod
	node     string
	wantFull bool
}

// checkNoRoom checks NoRoom's verdict for each case, and that the
// scheduler rejects the pod wherever NoRoom says full.
func checkNoRoom(t *testing.T, h *Engine, cases []noRoomCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			full := h.NoRoom(tc.pod)
			if full == nil {
				t.Fatal("NoRoom = nil under the default profile")
			}
			if got := full(tc.node); got != tc.wantFull {
				t.Errorf("NoRoom(%s)(%s) = %v, want %v", tc.pod.Name, tc.node, got, tc.wantFull)
			}
			if ferr := h.CheckPredicates(tc.pod, tc.node); tc.wantFull && ferr == nil {
				t.Errorf("NoRoom says %s is full but the scheduler takes %s there", tc.node, tc.pod.Name)
			}
		})
	}
}

// NoRoom may only say "full" where NodeResourcesFit's Filter rejects the
// pod: the planner skips those nodes without running the plugins.
func TestNoRoom(t *testing.T) {
	snap := snapshot.New()
	addNode(t, snap, "busy", nil)
	onePodNode := fx.Node("one-pod", 64, 256, nil)
	onePodNode.Status.Allocatable[v1.ResourcePods] = fx.Count(1)
	if err := snap.AddNode(onePodNode); err != nil {
		t.Fatal(err)
	}
	h := newEngine(t, snap)
	mustPlace(t, h, fx.Pod("big", 63000, nil), "busy")
	mustPlace(t, h, fx.Pod("only", 100, nil), "one-pod")

	withMemory := func(p *v1.Pod, giB int64) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(giB<<30, resource.BinarySI)
		return p
	}
	cases := []noRoomCase{
		{"one free core takes a one-core pod", fx.Pod("one", 1000, nil), "busy", false},
		{"two cores do not fit in one", fx.Pod("two", 2000, nil), "busy", true},
		{"memory beyond what is left", withMemory(fx.Pod("mem", 100, nil), 300), "busy", true},
		{"memory that fits", withMemory(fx.Pod("mem-ok", 100, nil), 200), "busy", false},
		{"no pod slot left", fx.Pod("slot", 100, nil), "one-pod", true},
		{"an extended resource the node lacks, and no device", fx.Pod("gpu", 100, fx.GPUs(fx.GPUResource, 1)), "busy", true},
	}
	checkNoRoom(t, h, cases)
}

// A pod that needs a new device finds no room on a node whose devices are
// all allocated; only there, and only where DynamicResources' Filter
// rejects it.
func TestNoRoomWithoutFreeDevices(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("one-gpu", "gpu.example.com", 1))
	admin := fx.ClaimTemplate("admin-gpu", "gpu.example.com", 1)
	admin.Spec.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	snap.SetResourceClaimTemplate(admin)
	all := fx.ClaimTemplate("all-gpus", "gpu.example.com", 0)
	all.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	snap.SetResourceClaimTemplate(all)
	addNode(t, snap, "full", nil, fx.GPUSlice("full", 2))
	addNode(t, snap, "one-left", nil, fx.GPUSlice("one-left", 2))
	addNode(t, snap, "plugin", fx.GPUs(fx.GPUResource, 4)) // a device plugin's GPUs, no slices
	h := newEngine(t, snap)
	for i, node := range []string{"full", "full", "one-left"} {
		mustPlace(t, h, fx.Pod(fmt.Sprintf("taken-%d", i), 100, fx.GPUs(fx.GPUResource, 1)), node)
	}
	gpu := func() *v1.Pod { return fx.Pod("gpu", 100, fx.GPUs(fx.GPUResource, 1)) }
	claim := func(template string) *v1.Pod {
		return fx.WithTemplateClaim(fx.Pod("claim-"+template, 100, nil), "gpu", template)
	}
	cases := []noRoomCase{
		{"extended resource, every device taken", gpu(), "full", true},
		{"extended resource, one device left", gpu(), "one-left", false},
		{"extended resource the node has in allocatable", gpu(), "plugin", false},
		{"own claim, every device taken", claim("one-gpu"), "full", true},
		{"own claim, one device left", claim("one-gpu"), "one-left", false},
		{"admin access takes allocated devices", claim("admin-gpu"), "full", false},
		{"allocation mode All is left to Filter", claim("all-gpus"), "full", false},
		{"no device asked", fx.Pod("cpu", 100, nil), "full", false},
	}
	checkNoRoom(t, h, cases)

	// Devices not local to one node may reach it: no verdict on devices.
	network := fx.GPUSlice("", 1)
	network.Name, network.Spec.NodeName, network.Spec.AllNodes = "network", nil, ptr.To(true)
	network.Spec.Pool.Name = "network"
	if err := snap.AddResourceSlice(network); err != nil {
		t.Fatal(err)
	}
	if h.NoRoom(gpu())("full") {
		t.Error("NoRoom says full is full though a network-attached device may serve it")
	}
	if ferr := h.CheckPredicates(gpu(), "full"); ferr != nil {
		t.Errorf("the network-attached device does not serve the pod on full: %v", ferr)
	}
}

func TestNoRoomOnlyWhenExact(t *testing.T) {
	podLevel := fx.Pod("pod-level", 1000, nil)
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: fx.Count(1)}}
	cases := []struct {
		name    string
		profile string // "" : the default profile
		pod     *v1.Pod
		wantNil bool
	}{
		{"default profile", "", fx.Pod("p", 1000, nil), false},
		{"draxr's name for NodeResourcesFit", "  plugins:\n    multiPoint:\n      disabled: [{name: NodeResourcesFit}]\n      enabled: [{name: DraxrNodeResourcesFit}]\n", fx.Pod("p", 1000, nil), false},
		{"profile without the resource filter", "  plugins:\n    filter:\n      disabled: [{name: NodeResourcesFit}]\n", fx.Pod("p", 1000, nil), true},
		{"pod-level resources", "", podLevel, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h *Engine
			if tc.profile == "" {
				h = newEngine(t, snapshot.New())
			} else {
				h = parseProfile(t, tc.profile)
			}
			if got := h.NoRoom(tc.pod) == nil; got != tc.wantNil {
				t.Errorf("NoRoom == nil: %v, want %v", got, tc.wantNil)
			}
		})
	}
}

func TestSpreadsByDefault(t *testing.T) {
	listArgs := func(when string) string {
		return "  pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints:\n" +
			"      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: " + when + "}\n"
	}
	cases := []struct {
		name, profile string
		want          bool
	}{
		{"System defaults only score", "  pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: System}\n", false},
		{"List with DoNotSchedule filters", listArgs("DoNotSchedule"), true},
		{"List with ScheduleAnyway only scores", listArgs("ScheduleAnyway"), false},
		{"plugin off at Filter", listArgs("DoNotSchedule") + "  plugins:\n    filter:\n      disabled: [{name: PodTopologySpread}]\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseProfile(t, tc.profile).SpreadsByDefault(); got != tc.want {
				t.Errorf("SpreadsByDefault() = %v, want %v", got, tc.want)
			}
		})
	}
}

// Candidates narrows the nodes kind by kind as they fill: the nodes left
// for the next pod of a kind are those NoRoom leaves among the last ones.
func TestCandidatesNarrowAsNodesFill(t *testing.T) {
	h := cluster(t, 3, 2)
	nodes := h.snap.NodeNames()
	gpu := func(i int) *v1.Pod { return fx.Pod(fmt.Sprintf("gpu-%d", i), 100, fx.GPUs(fx.GPUResource, 1)) }
	room := h.NewCandidates()
	var placed []string
	for i := range 7 {
		candidates := room.For(gpu(i), "gpu", nodes)
		if i == 6 {
			if len(candidates) != 0 {
				t.Errorf("after 6 one-GPU pods on 3 two-GPU nodes, candidates %v, want none", candidates)
			}
			break
		}
		node, _, ferr := h.PlaceOnAnyNode(gpu(i), candidates)
		if ferr != nil {
			t.Fatalf("pod %d on %v: %v", i, candidates, ferr)
		}
		placed = append(placed, node)
		if want := 3 - i/2; len(candidates) != want {
			t.Errorf("pod %d: %d candidates %v, want %d (nodes with a free device)", i, len(candidates), candidates, want)
		}
	}
	if got := fmt.Sprint(placed); got != "[node-0 node-0 node-1 node-1 node-2 node-2]" {
		t.Errorf("placed on %s, want two on each node in order", got)
	}
	if cpu := room.For(fx.Pod("cpu", 100, nil), "cpu", nodes); len(cpu) != 3 {
		t.Errorf("a CPU pod's candidates %v, want all three nodes: another kind starts from the whole list", cpu)
	}
}
