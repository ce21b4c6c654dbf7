package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// TestPlaceDevicePacking places N pods of k devices first-fit onto nodes of
// D devices and checks where they land and which devices they hold.
func TestPlaceDevicePacking(t *testing.T) {
	tests := []struct {
		name           string
		nodes, devices int
		pods           int
		perPod         int64
		wantPerNode    int // on every node
		wantUnplaced   int
	}{
		{name: "64 one-device pods fill 8 nodes of 8", nodes: 8, devices: 8, pods: 64, perPod: 1, wantPerNode: 8},
		{name: "65th one-device pod does not fit", nodes: 8, devices: 8, pods: 65, perPod: 1, wantPerNode: 8, wantUnplaced: 1},
		{name: "two-device pods: 4 per 8-device node", nodes: 4, devices: 8, pods: 20, perPod: 2, wantPerNode: 4, wantUnplaced: 4},
		{name: "three-device pods strand 2 devices per node", nodes: 3, devices: 8, pods: 8, perPod: 3, wantPerNode: 2, wantUnplaced: 2},
		{name: "whole-node pods", nodes: 2, devices: 8, pods: 3, perPod: 8, wantPerNode: 1, wantUnplaced: 1},
		{name: "pod larger than any node", nodes: 2, devices: 8, pods: 2, perPod: 9, wantPerNode: 0, wantUnplaced: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, tc.nodes, tc.devices)
			nodes := h.snap.NodeNames()
			seen := map[string]string{} // device -> pod
			unplaced := 0
			for i := 0; i < tc.pods; i++ {
				pod := fx.Pod(fmt.Sprintf("p%d", i), 100, fx.GPUs(fx.GPUResource, tc.perPod))
				node, placed, ferr := h.PlaceOnAnyNode(pod, nodes)
				if ferr != nil {
					unplaced++
					if len(ferr.PerNode) != tc.nodes || ferr.Never() {
						t.Errorf("pod %s: FitError %v: want a plain rejection by all %d nodes", pod.Name, ferr, tc.nodes)
					}
					wantErrContains(t, ferr, "DynamicResources: cannot allocate all claims")
					continue
				}
				devs := deviceNames(extendedClaim(h, placed))
				if int64(len(devs)) != tc.perPod {
					t.Errorf("pod %s holds %d devices %v, want %d", pod.Name, len(devs), devs, tc.perPod)
				}
				for _, d := range devs {
					if other, dup := seen[d]; dup {
						t.Errorf("device %s given to %s and %s", d, other, pod.Name)
					}
					seen[d] = pod.Name
					if want := fx.Driver + "/" + node + "/"; !strings.HasPrefix(d, want) {
						t.Errorf("pod %s on %s got device %s of another node", pod.Name, node, d)
					}
				}
			}
			if unplaced != tc.wantUnplaced {
				t.Errorf("unplaced pods = %d, want %d", unplaced, tc.wantUnplaced)
			}
			for node, n := range podCounts(h) {
				if n != tc.wantPerNode {
					t.Errorf("node %s has %d pods, want %d", node, n, tc.wantPerNode)
				}
			}
			wantDevices := (tc.pods - tc.wantUnplaced) * int(tc.perPod)
			if got := len(allocatedDevices(h)); got != wantDevices || len(seen) != wantDevices {
				t.Errorf("allocated devices = %d (claims hold %d), want %d", got, len(seen), wantDevices)
			}
		})
	}
}

// TestExplicitAndImplicitNames asks for devices by the class's explicit
// extended resource name and by its implicit deviceclass.resource.kubernetes.io name.
func TestExplicitAndImplicitNames(t *testing.T) {
	const fpgaDriver = "fpga.example.com"
	tests := []struct {
		name        string
		requests    v1.ResourceList
		wantDevices []string
		wantClasses []string // device class of each claim request, by request name
		wantMapped  []string // resource names in the request mappings
	}{
		{
			name:        "explicit name",
			requests:    fx.GPUs(fx.GPUResource, 2),
			wantDevices: []string{"gpu.example.com/node-0/gpu-0", "gpu.example.com/node-0/gpu-1"},
			wantClasses: []string{gpuClass},
			wantMapped:  []string{string(fx.GPUResource)},
		},
		{
			name:        "implicit name of a class that also has an explicit name",
			requests:    fx.GPUs(implicitGPU, 1),
			wantDevices: []string{"gpu.example.com/node-0/gpu-0"},
			wantClasses: []string{gpuClass},
			wantMapped:  []string{string(implicitGPU)},
		},
		{
			name:        "implicit name of a class without an explicit name",
			requests:    fx.GPUs("deviceclass.resource.kubernetes.io/fpga", 1),
			wantDevices: []string{"fpga.example.com/node-0/fpga-0"},
			wantClasses: []string{"fpga"},
			wantMapped:  []string{"deviceclass.resource.kubernetes.io/fpga"},
		},
		{
			name:        "both names of one class in one container",
			requests:    v1.ResourceList{fx.GPUResource: fx.Count(1), implicitGPU: fx.Count(1)},
			wantDevices: []string{"gpu.example.com/node-0/gpu-0", "gpu.example.com/node-0/gpu-1"},
			wantClasses: []string{gpuClass, gpuClass},
			wantMapped:  []string{string(implicitGPU), string(fx.GPUResource)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
			snap.SetDeviceClass(fx.Class("fpga", fpgaDriver, "", fx.Epoch))
			addNode(t, snap, "node-0", nil, fx.GPUSlice("node-0", 4), fx.DeviceSlice("node-0", fpgaDriver, 4, "fpga"))
			h := newEngine(t, snap)

			placed := mustPlace(t, h, fx.Pod("p", 100, tc.requests), "node-0")
			claim := extendedClaim(h, placed)
			if got := deviceNames(claim); !slices.Equal(got, tc.wantDevices) {
				t.Errorf("devices = %v, want %v", got, tc.wantDevices)
			}
			if got := allocatedDevices(h); !slices.Equal(got, tc.wantDevices) {
				t.Errorf("snapshot counts %v as taken, want %v", got, tc.wantDevices)
			}
			var classes []string
			for _, r := range claim.Spec.Devices.Requests {
				classes = append(classes, r.Exactly.DeviceClassName)
			}
			if !slices.Equal(classes, tc.wantClasses) {
				t.Errorf("claim request classes = %v, want %v", classes, tc.wantClasses)
			}
			var mapped []string
			for _, m := range placed.Status.ExtendedResourceClaimStatus.RequestMappings {
				mapped = append(mapped, m.ResourceName)
			}
			if !slices.Equal(mapped, tc.wantMapped) {
				t.Errorf("mapped resources = %v, want %v", mapped, tc.wantMapped)
			}
		})
	}
}

// TestDevicePluginAndDRANodes: a node that advertises example.com/gpu in
// allocatable (device plugin) is handled by NodeResourcesFit with no claim,
// a node with ResourceSlices by DynamicResources with a claim.
func TestDevicePluginAndDRANodes(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
	addNode(t, snap, "device-plugin", fx.GPUs(fx.GPUResource, 2))
	addNode(t, snap, "dra", nil, fx.GPUSlice("dra", 2))
	h := newEngine(t, snap)

	steps := []struct {
		pod        string
		candidates []string
		wantNode   string // "" when the pod must not fit
		wantClaim  bool
		wantErr    []string
	}{
		{pod: "a", candidates: []string{"device-plugin"}, wantNode: "device-plugin"},
		{pod: "b", candidates: []string{"dra"}, wantNode: "dra", wantClaim: true},
		{pod: "c", candidates: []string{"device-plugin", "dra"}, wantNode: "device-plugin"},
		{pod: "d", candidates: []string{"device-plugin"}, wantErr: []string{"NodeResourcesFit: Insufficient example.com/gpu"}},
		{pod: "e", candidates: []string{"device-plugin", "dra"}, wantNode: "dra", wantClaim: true},
		{pod: "f", candidates: []string{"device-plugin", "dra"},
			wantErr: []string{"1 node(s): NodeResourcesFit: Insufficient example.com/gpu", "1 node(s): DynamicResources: cannot allocate all claims"}},
	}
	for _, s := range steps {
		claimsBefore := len(h.snap.AllResourceClaims())
		node, placed, ferr := h.PlaceOnAnyNode(fx.Pod(s.pod, 100, fx.GPUs(fx.GPUResource, 1)), s.candidates)
		if s.wantNode == "" {
			wantErrContains(t, ferr, s.wantErr...)
			continue
		}
		if ferr != nil {
			t.Fatalf("pod %s: %v", s.pod, ferr)
		}
		if node != s.wantNode {
			t.Errorf("pod %s placed on %s, want %s", s.pod, node, s.wantNode)
		}
		gotClaim := len(h.snap.AllResourceClaims()) - claimsBefore
		switch {
		case s.wantClaim && (gotClaim != 1 || placed.Status.ExtendedResourceClaimStatus == nil):
			t.Errorf("pod %s on %s: %d new claims, status %+v; want the DRA path", s.pod, node, gotClaim, placed.Status.ExtendedResourceClaimStatus)
		case !s.wantClaim && (gotClaim != 0 || placed.Status.ExtendedResourceClaimStatus != nil):
			t.Errorf("pod %s on %s: %d new claims, status %+v; want the device-plugin path", s.pod, node, gotClaim, placed.Status.ExtendedResourceClaimStatus)
		}
	}
	if got, want := podsOn(h, "device-plugin"), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("device-plugin node runs %v, want %v", got, want)
	}
	if got, want := podsOn(h, "dra"), []string{"b", "e"}; !slices.Equal(got, want) {
		t.Errorf("dra node runs %v, want %v", got, want)
	}
	if got := len(allocatedDevices(h)); got != 2 {
		t.Errorf("allocated devices = %d, want 2 (only the DRA node's)", got)
	}
}

// TestUserClaimsAndExtendedResources: a pod with a ResourceClaim (from a
// template, or pre-existing) and an extended resource gets both allocated.
func TestUserClaimsAndExtendedResources(t *testing.T) {
	tests := []struct {
		name      string
		claim     *resourceapi.ResourceClaim // pre-existing claim, if any
		template  *resourceapi.ResourceClaimTemplate
		extended  int64
		nodeDevs  int
		wantFit   bool
		wantClaim int // devices of the user claim
	}{
		{name: "template claim and extended resource", template: fx.ClaimTemplate("two-gpus", gpuClass, 2), extended: 1, nodeDevs: 8, wantFit: true, wantClaim: 2},
		{name: "existing claim and extended resource", claim: fx.Claim("one-gpu", gpuClass, 1), extended: 2, nodeDevs: 8, wantFit: true, wantClaim: 1},
		{name: "exactly the node's devices", template: fx.ClaimTemplate("five", gpuClass, 5), extended: 3, nodeDevs: 8, wantFit: true, wantClaim: 5},
		{name: "together more than the node has", template: fx.ClaimTemplate("six", gpuClass, 6), extended: 3, nodeDevs: 8},
		{name: "existing claim: together more than the node has", claim: fx.Claim("eight", gpuClass, 8), extended: 1, nodeDevs: 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 1, tc.nodeDevs)
			pod := fx.Pod("p", 100, fx.GPUs(fx.GPUResource, tc.extended))
			if tc.claim != nil {
				h.snap.SetResourceClaim(tc.claim)
				fx.WithClaim(pod, "user", tc.claim.Name)
			} else {
				h.snap.SetResourceClaimTemplate(tc.template)
				fx.WithTemplateClaim(pod, "user", tc.template.Name)
			}

			placed, ferr := h.Place(pod, "node-0")
			if !tc.wantFit {
				wantErrContains(t, ferr, "DynamicResources: cannot allocate all claims")
				if got := allocatedDevices(h); len(got) != 0 {
					t.Errorf("a rejected pod left devices allocated: %v", got)
				}
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			name, _, err := resourceclaim.Name(placed, &placed.Spec.ResourceClaims[0])
			if err != nil || name == nil {
				t.Fatalf("user claim name: %v, %v", name, err)
			}
			user := h.snap.ResourceClaim("default", *name)
			xr := extendedClaim(h, placed)
			if got := deviceNames(user); len(got) != tc.wantClaim {
				t.Errorf("user claim devices = %v, want %d", got, tc.wantClaim)
			}
			if got := deviceNames(xr); int64(len(got)) != tc.extended {
				t.Errorf("extended-resource claim devices = %v, want %d", got, tc.extended)
			}
			for _, c := range []*resourceapi.ResourceClaim{user, xr} {
				if !resourceclaim.IsReservedForPod(placed, c, false) || len(c.Status.ReservedFor) != 1 {
					t.Errorf("claim %s reservedFor = %+v, want only the pod", c.Name, c.Status.ReservedFor)
				}
			}
			all := slices.Concat(deviceNames(user), deviceNames(xr))
			slices.Sort(all)
			if got := allocatedDevices(h); !slices.Equal(got, all) || len(slices.Compact(all)) != tc.wantClaim+int(tc.extended) {
				t.Errorf("taken devices = %v, claims hold %v: want %d distinct", got, all, tc.wantClaim+int(tc.extended))
			}
		})
	}
}

// TestRunningPodsClaimsAreHonoured: devices held by the extended-resource
// claim of a pod already running on the node are not handed out again.
func TestRunningPodsClaimsAreHonoured(t *testing.T) {
	tests := []struct {
		held    int
		wantFit int
	}{
		{held: 0, wantFit: 8},
		{held: 6, wantFit: 2},
		{held: 8, wantFit: 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d of 8 held", tc.held), func(t *testing.T) {
			h := cluster(t, 1, 8)
			var heldDevices []string
			if tc.held > 0 {
				running := fx.Pod("running", 100, fx.GPUs(fx.GPUResource, int64(tc.held)))
				running.Spec.NodeName = "node-0"
				for i := 0; i < tc.held; i++ {
					heldDevices = append(heldDevices, fmt.Sprintf("gpu-%d", i))
				}
				if err := h.snap.AddPod(running); err != nil {
					t.Fatal(err)
				}
				h.snap.SetResourceClaim(fx.ExtendedResourceClaim(running, gpuClass, fx.Driver, "node-0", 1, heldDevices...))
			}

			fit := 0
			for i := 0; i < 9; i++ {
				placed, ferr := h.Place(fx.Pod(fmt.Sprintf("p%d", i), 100, fx.GPUs(fx.GPUResource, 1)), "node-0")
				if ferr != nil {
					wantErrContains(t, ferr, "cannot allocate all claims")
					break
				}
				fit++
				for _, d := range deviceNames(extendedClaim(h, placed)) {
					if slices.Contains(heldDevices, strings.TrimPrefix(d, fx.Driver+"/node-0/")) {
						t.Errorf("pod %s got %s, held by the running pod", placed.Name, d)
					}
				}
			}
			if fit != tc.wantFit {
				t.Errorf("%d more one-GPU pods fit, want %d", fit, tc.wantFit)
			}
			if got := len(allocatedDevices(h)); got != tc.held+tc.wantFit {
				t.Errorf("allocated devices = %d, want %d", got, tc.held+tc.wantFit)
			}
		})
	}
}

// TestClaimLimit: at most 32 DRA-backed extended-resource devices fit in
// the pod's one claim; more is a scheduler error, reported as never
// placeable, without a panic or a placement.
func TestClaimLimit(t *testing.T) {
	gpus := func(n int64) v1.ResourceList { return fx.GPUs(fx.GPUResource, n) }
	tests := []struct {
		name        string
		pod         *v1.Pod
		wantDevices int // 0: must be rejected
		wantCount   string
	}{
		{name: "33 in one container", pod: fx.Pod("p", 100, gpus(33)), wantCount: "adding 33 devices exceeds the claim limit of 32, with 0 already accounted for"},
		{name: "17+17 in two containers", pod: podWith("p", nil, fx.Container("a", 100, gpus(17)), fx.Container("b", 100, gpus(17))), wantCount: "adding 17 devices exceeds the claim limit of 32, with 17 already accounted for"},
		{name: "sidecar 17 + main 16", pod: podWith("p", []v1.Container{fx.InitContainer("side", 100, gpus(17), true)}, fx.Container("main", 100, gpus(16))), wantCount: "adding 16 devices exceeds the claim limit of 32, with 17 already accounted for"},
		{name: "32 in one container", pod: fx.Pod("p", 100, gpus(32)), wantDevices: 32},
		{name: "16+16 in two containers", pod: podWith("p", nil, fx.Container("a", 100, gpus(16)), fx.Container("b", 100, gpus(16))), wantDevices: 32},
		{name: "init 30 reuses main's 30", pod: podWith("p", []v1.Container{fx.InitContainer("init", 100, gpus(30), false)}, fx.Container("main", 100, gpus(30))), wantDevices: 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 2, 40)
			check := h.CheckPredicates(tc.pod, "node-0")
			node, placed, ferr := h.PlaceOnAnyNode(tc.pod, h.snap.NodeNames())
			if tc.wantDevices > 0 {
				if check != nil || ferr != nil {
					t.Fatalf("CheckPredicates: %v; PlaceOnAnyNode: %v", check, ferr)
				}
				if got := len(deviceNames(extendedClaim(h, placed))); got != tc.wantDevices {
					t.Errorf("pod on %s holds %d devices, want %d", node, got, tc.wantDevices)
				}
				return
			}
			for what, err := range map[string]*FitError{"CheckPredicates": check, "PlaceOnAnyNode": ferr} {
				if err == nil {
					t.Fatalf("%s: pod fits, want a rejection", what)
				}
				wantErrContains(t, err, "cannot be placed", tc.wantCount, "exceeds the claim limit of 32")
				if !err.Never() {
					t.Errorf("%s: Never() = false, want true", what)
				}
			}
			if placed != nil || len(h.snap.AllResourceClaims()) != 0 || len(allocatedDevices(h)) != 0 {
				t.Errorf("rejected pod left state: placed %v, claims %d, devices %d", placed != nil, len(h.snap.AllResourceClaims()), len(allocatedDevices(h)))
			}
		})
	}
}

// TestBrokenDeviceClassSelector: a class whose CEL selector does not compile
// yields a reason naming the class and the CEL error; no panic.
func TestBrokenDeviceClassSelector(t *testing.T) {
	tests := []struct {
		name       string
		expression string
		pod        func(h *Engine) *v1.Pod
		wantErr    []string
	}{
		{
			name:       "extended resource, syntax error",
			expression: "device.driver ==",
			pod:        func(*Engine) *v1.Pod { return fx.Pod("p", 100, fx.GPUs("example.com/broken", 1)) },
			wantErr:    []string{"cannot be placed", "class broken: selector #0: CEL compile error", "Syntax error"},
		},
		{
			name:       "extended resource, unknown identifier",
			expression: "device.nosuchfield == 1",
			pod:        func(*Engine) *v1.Pod { return fx.Pod("p", 100, fx.GPUs("example.com/broken", 1)) },
			wantErr:    []string{"cannot be placed", "class broken: selector #0: CEL compile error"},
		},
		{
			name:       "implicit name",
			expression: "device.driver ==",
			pod: func(*Engine) *v1.Pod {
				return fx.Pod("p", 100, fx.GPUs("deviceclass.resource.kubernetes.io/broken", 1))
			},
			wantErr: []string{"cannot be placed", "class broken: selector #0: CEL compile error"},
		},
		{
			name:       "claim template",
			expression: "device.driver ==",
			pod: func(h *Engine) *v1.Pod {
				h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("broken", "broken", 1))
				return fx.WithTemplateClaim(fx.Pod("p", 100, nil), "gpu", "broken")
			},
			wantErr: []string{"cannot be placed", "class broken: selector #0: CEL compile error"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 2, 8)
			broken := fx.Class("broken", fx.Driver, "example.com/broken", fx.Epoch)
			broken.Spec.Selectors[0].CEL.Expression = tc.expression
			h.snap.SetDeviceClass(broken)

			_, placed, ferr := h.PlaceOnAnyNode(tc.pod(h), h.snap.NodeNames())
			if placed != nil {
				t.Fatalf("pod placed with a broken class")
			}
			wantErrContains(t, ferr, tc.wantErr...)
			if len(allocatedDevices(h)) != 0 {
				t.Errorf("devices allocated: %v", allocatedDevices(h))
			}
			// The working class is unaffected.
			mustPlace(t, h, fx.Pod("ok", 100, fx.GPUs(fx.GPUResource, 1)), "node-0")
		})
	}
}

// TestPlaceAlreadyPlacedPod: placing a pod that is already placed is
// refused with a clear reason and changes nothing (it used to panic in the
// plugin's Unreserve for a pod with a claim reserved for it).
func TestPlaceAlreadyPlacedPod(t *testing.T) {
	tests := []struct {
		name string
		pod  func(h *Engine) *v1.Pod
	}{
		{name: "no devices", pod: func(*Engine) *v1.Pod { return fx.Pod("p", 100, nil) }},
		{name: "extended resource", pod: func(*Engine) *v1.Pod { return fx.Pod("p", 100, fx.GPUs(fx.GPUResource, 1)) }},
		{name: "template claim", pod: func(h *Engine) *v1.Pod {
			h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("one", gpuClass, 1))
			return fx.WithTemplateClaim(fx.Pod("p", 100, nil), "gpu", "one")
		}},
		{name: "existing claim", pod: func(h *Engine) *v1.Pod {
			h.snap.SetResourceClaim(fx.Claim("one", gpuClass, 1))
			return fx.WithClaim(fx.Pod("p", 100, nil), "gpu", "one")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 2, 4)
			pod := tc.pod(h)
			placed := mustPlace(t, h, pod, "node-0")
			before := state(t, h)
			for _, again := range []*v1.Pod{pod, placed} {
				_, got, ferr := h.PlaceOnAnyNode(again, h.snap.NodeNames())
				if got != nil {
					t.Fatalf("pod placed twice")
				}
				if ferr == nil {
					t.Fatal("no error")
				}
				if _, err := h.Place(again, "node-0"); err == nil || !strings.Contains(err.Error(), `pod with uid "pod-p" is already placed on node node-0`) {
					t.Errorf("Place on its own node: %v", err)
				}
			}
			if after := state(t, h); after != before {
				t.Errorf("state changed:\n%s", diffStates(after, before))
			}
		})
	}
}

// TestPlaceOnAnyNodeCandidates: candidates are tried in order; duplicates,
// unknown and full nodes do not hide a node that fits.
func TestPlaceOnAnyNodeCandidates(t *testing.T) {
	tests := []struct {
		name       string
		fillNode0  bool
		candidates []string
		wantNode   string
		wantErr    []string
	}{
		{name: "first candidate that fits", candidates: []string{"node-1", "node-0"}, wantNode: "node-1"},
		{name: "node named twice", candidates: []string{"node-0", "node-0"}, wantNode: "node-0"},
		{name: "full node named twice", fillNode0: true, candidates: []string{"node-0", "node-0", "node-1"}, wantNode: "node-1"},
		{name: "full node skipped", fillNode0: true, candidates: []string{"node-0", "node-1"}, wantNode: "node-1"},
		{name: "unknown node skipped", candidates: []string{"nope", "node-1"}, wantNode: "node-1"},
		{name: "only an unknown node", candidates: []string{"nope"}, wantErr: []string{"1 node(s): node nope does not exist"}},
		{name: "no candidates", wantErr: []string{"fits none of 0 node(s)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 2, 4)
			if tc.fillNode0 {
				mustPlace(t, h, fx.Pod("filler", 100, fx.GPUs(fx.GPUResource, 4)), "node-0")
			}
			node, placed, ferr := h.PlaceOnAnyNode(fx.Pod("p", 100, fx.GPUs(fx.GPUResource, 1)), tc.candidates)
			if tc.wantErr != nil {
				wantErrContains(t, ferr, tc.wantErr...)
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			if node != tc.wantNode {
				t.Errorf("placed on %s, want %s", node, tc.wantNode)
			}
			if devs := deviceNames(extendedClaim(h, placed)); len(devs) != 1 || !strings.HasPrefix(devs[0], fx.Driver+"/"+node+"/") {
				t.Errorf("devices %v, want one of %s", devs, node)
			}
		})
	}
}

// TestNetworkAttachedDevices: devices in a slice that is not local to one
// node (allNodes) are shared by all nodes and counted once.
func TestNetworkAttachedDevices(t *testing.T) {
	const netDriver = "net.example.com"
	h := cluster(t, 2, 4)
	shared := fx.DeviceSlice("node-0", netDriver, 3, "net")
	shared.Name = "network-attached"
	shared.Spec.NodeName = nil
	shared.Spec.AllNodes = ptr.To(true)
	shared.Spec.Pool.Name = "network"
	if err := h.snap.AddResourceSlice(shared); err != nil {
		t.Fatal(err)
	}
	h.snap.SetDeviceClass(fx.Class("net", netDriver, "example.com/net", fx.Epoch))

	var got []string
	for i, node := range []string{"node-0", "node-1", "node-1", "node-0"} {
		placed, ferr := h.Place(fx.Pod(fmt.Sprintf("p%d", i), 100, fx.GPUs("example.com/net", 1)), node)
		if i == 3 {
			wantErrContains(t, ferr, "cannot allocate all claims")
			break
		}
		if ferr != nil {
			t.Fatalf("pod %d on %s: %v", i, node, ferr)
		}
		got = append(got, deviceNames(extendedClaim(h, placed))...)
	}
	slices.Sort(got)
	want := []string{"net.example.com/network/net-0", "net.example.com/network/net-1", "net.example.com/network/net-2"}
	if !slices.Equal(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
}

// TestMixedDevicePluginAndDRAResources: on one node, a resource in
// allocatable stays with NodeResourcesFit while a DeviceClass-mapped one
// with allocatable 0 (or absent) goes to DRA.
func TestMixedDevicePluginAndDRAResources(t *testing.T) {
	const fpga v1.ResourceName = "vendor.com/fpga"
	tests := []struct {
		name         string
		allocatable  v1.ResourceList
		requests     v1.ResourceList
		wantRequests []string // extended-resource claim requests, nil: no claim
		wantMapped   []string
		wantErr      string
	}{
		{
			name:         "DRA gpu next to device-plugin fpga",
			allocatable:  v1.ResourceList{fpga: fx.Count(2)},
			requests:     v1.ResourceList{fx.GPUResource: fx.Count(2), fpga: fx.Count(1)},
			wantRequests: []string{"container-0-request-1"}, // cpu, example.com/gpu, vendor.com/fpga
			wantMapped:   []string{string(fx.GPUResource)},
		},
		{
			name:         "allocatable 0 for the mapped name means DRA",
			allocatable:  v1.ResourceList{fx.GPUResource: fx.Count(0)},
			requests:     v1.ResourceList{fx.GPUResource: fx.Count(1)},
			wantRequests: []string{"container-0-request-1"},
			wantMapped:   []string{string(fx.GPUResource)},
		},
		{
			name:        "device-plugin fpga exhausted",
			allocatable: v1.ResourceList{fpga: fx.Count(2)},
			requests:    v1.ResourceList{fx.GPUResource: fx.Count(1), fpga: fx.Count(3)},
			wantErr:     "NodeResourcesFit: Insufficient vendor.com/fpga",
		},
		{
			name:     "unmapped resource the node does not have",
			requests: v1.ResourceList{fx.GPUResource: fx.Count(1), fpga: fx.Count(1)},
			wantErr:  "Insufficient vendor.com/fpga",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
			addNode(t, snap, "node-0", tc.allocatable, fx.GPUSlice("node-0", 4))
			h := newEngine(t, snap)

			placed, ferr := h.Place(fx.Pod("p", 100, tc.requests), "node-0")
			if tc.wantErr != "" {
				wantErrContains(t, ferr, tc.wantErr)
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			claim := extendedClaim(h, placed)
			var requests, mapped []string
			for _, r := range claim.Spec.Devices.Requests {
				requests = append(requests, r.Name)
			}
			for _, m := range placed.Status.ExtendedResourceClaimStatus.RequestMappings {
				mapped = append(mapped, m.ResourceName)
			}
			if !slices.Equal(requests, tc.wantRequests) || !slices.Equal(mapped, tc.wantMapped) {
				t.Errorf("claim requests %v, mapped %v; want %v, %v", requests, mapped, tc.wantRequests, tc.wantMapped)
			}
			if got, want := len(allocatedDevices(h)), int(tc.requests.Name(fx.GPUResource, resource.DecimalSI).Value()); got != want {
				t.Errorf("allocated devices = %d, want %d", got, want)
			}
			if got, want := h.snap.NodeInfo("node-0").Requested.ScalarResources[fpga], tc.requests.Name(fpga, resource.DecimalSI).Value(); got != want {
				t.Errorf("node requested %s = %d, want %d", fpga, got, want)
			}
		})
	}
}

// TestGeneratedClaimNamesDoNotCollide: claim names are the pod name
// (truncated) plus a hash of the pod UID; two pods whose long names share
// the truncated prefix and whose UIDs hash alike must still get claims of
// their own, not replace each other's.
func TestGeneratedClaimNamesDoNotCollide(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		name string
		uids [2]string // hash to the same suffix for the claim's seed
		pod  func(name string) *v1.Pod
	}{
		{
			name: "extended-resource claims",
			uids: [2]string{"pod-uid-13928", "pod-uid-23304"},
			pod:  func(name string) *v1.Pod { return fx.Pod(name, 100, fx.GPUs(fx.GPUResource, 1)) },
		},
		{
			name: "claims from a template",
			uids: [2]string{"pod-uid-6", "pod-uid-3147"},
			pod: func(name string) *v1.Pod {
				return fx.WithTemplateClaim(fx.Pod(name, 100, nil), "gpu", "one")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 1, 4)
			h.snap.SetResourceClaimTemplate(fx.ClaimTemplate("one", gpuClass, 1))
			var placed []*v1.Pod
			for i, uid := range tc.uids {
				pod := tc.pod(fmt.Sprintf("%s-%d", long, i))
				pod.UID = types.UID(uid)
				placed = append(placed, mustPlace(t, h, pod, "node-0"))
			}
			if got := len(allocatedDevices(h)); got != 2 {
				t.Errorf("allocated devices = %d, want 2", got)
			}
			if got := len(h.snap.AllResourceClaims()); got != 2 {
				t.Errorf("%d claims, want one per pod", got)
			}
			for _, p := range placed {
				if n := countOwned(h, p); n != 1 {
					t.Errorf("pod %s owns %d claims, want 1", p.UID, n)
				}
			}
			// Removing one pod leaves the other's devices taken.
			if _, err := h.Remove(placed[0].UID); err != nil {
				t.Fatal(err)
			}
			if got := len(allocatedDevices(h)); got != 1 {
				t.Errorf("after removing one pod: allocated devices = %d, want 1", got)
			}
		})
	}
}
