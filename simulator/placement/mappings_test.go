package placement

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// TestInitContainersAndRequestMappings checks how many devices a pod with
// init containers takes, the requests of its extended-resource claim and
// pod.status.extendedResourceClaimStatus.requestMappings against the
// upstream convention: requests container-<i>-request-<j>, i indexing init
// containers then containers, j the container's sorted request names;
// non-sidecar init containers reuse the devices of long-lived containers
// that start after them, and share one request for what is left.
func TestInitContainersAndRequestMappings(t *testing.T) {
	gpus := func(n int64) v1.ResourceList { return fx.GPUs(fx.GPUResource, n) }
	const gpu = string(fx.GPUResource)
	m := func(container, request string) v1.ContainerExtendedResourceRequest {
		return v1.ContainerExtendedResourceRequest{ContainerName: container, ResourceName: gpu, RequestName: request}
	}
	tests := []struct {
		name         string
		init         []v1.Container
		containers   []v1.Container
		wantDevices  int
		wantRequests map[string]int64 // request name -> count
		wantMappings []v1.ContainerExtendedResourceRequest
	}{
		{
			name:         "init container reuses the main container's device",
			init:         []v1.Container{fx.InitContainer("init", 100, gpus(1), false)},
			containers:   []v1.Container{fx.Container("main", 100, gpus(1))},
			wantDevices:  1,
			wantRequests: map[string]int64{"container-1-request-1": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{m("main", "container-1-request-1"), m("init", "container-1-request-1")},
		},
		{
			name:         "sidecar keeps its own device",
			init:         []v1.Container{fx.InitContainer("sidecar", 100, gpus(1), true)},
			containers:   []v1.Container{fx.Container("main", 100, gpus(1))},
			wantDevices:  2,
			wantRequests: map[string]int64{"container-0-request-1": 1, "container-1-request-1": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{m("sidecar", "container-0-request-1"), m("main", "container-1-request-1")},
		},
		{
			name:         "init container asks more than main: the rest is its own request",
			init:         []v1.Container{fx.InitContainer("init", 100, gpus(2), false)},
			containers:   []v1.Container{fx.Container("main", 100, gpus(1))},
			wantDevices:  2,
			wantRequests: map[string]int64{"container-0-request-1": 1, "container-1-request-1": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				m("main", "container-1-request-1"), m("init", "container-1-request-1"), m("init", "container-0-request-1"),
			},
		},
		{
			name: "two init containers: one covered by main, one with an extra request",
			init: []v1.Container{
				fx.InitContainer("init-a", 100, gpus(1), false),
				fx.InitContainer("init-b", 100, gpus(2), false),
			},
			containers:   []v1.Container{fx.Container("main", 100, gpus(1))},
			wantDevices:  2,
			wantRequests: map[string]int64{"container-1-request-1": 1, "container-2-request-1": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				m("main", "container-2-request-1"),
				m("init-a", "container-2-request-1"),
				m("init-b", "container-2-request-1"), m("init-b", "container-1-request-1"),
			},
		},
		{
			name: "init containers only: they share the largest request",
			init: []v1.Container{
				fx.InitContainer("init-a", 100, gpus(2), false),
				fx.InitContainer("init-b", 100, gpus(2), false),
				fx.InitContainer("init-c", 100, gpus(1), false),
			},
			containers:   []v1.Container{fx.Container("main", 100, nil)},
			wantDevices:  2,
			wantRequests: map[string]int64{"container-0-request-1": 2},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				m("init-a", "container-0-request-1"), m("init-b", "container-0-request-1"), m("init-c", "container-0-request-1"),
			},
		},
		{
			name: "init container reuses a later sidecar and main",
			init: []v1.Container{
				fx.InitContainer("init", 100, gpus(2), false),
				fx.InitContainer("sidecar", 100, gpus(1), true),
			},
			containers:   []v1.Container{fx.Container("main", 100, gpus(1))},
			wantDevices:  2,
			wantRequests: map[string]int64{"container-1-request-1": 1, "container-2-request-1": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				m("sidecar", "container-1-request-1"), m("main", "container-2-request-1"),
				m("init", "container-1-request-1"), m("init", "container-2-request-1"),
			},
		},
		{
			name: "init container after a sidecar does not reuse it",
			init: []v1.Container{
				fx.InitContainer("sidecar", 100, gpus(1), true),
				fx.InitContainer("init", 100, gpus(1), false),
			},
			containers:   []v1.Container{fx.Container("main", 100, gpus(1))},
			wantDevices:  2,
			wantRequests: map[string]int64{"container-0-request-1": 1, "container-2-request-1": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				m("sidecar", "container-0-request-1"), m("main", "container-2-request-1"), m("init", "container-2-request-1"),
			},
		},
		{
			name:         "two main containers",
			containers:   []v1.Container{fx.Container("a", 100, gpus(1)), fx.Container("b", 100, gpus(2))},
			wantDevices:  3,
			wantRequests: map[string]int64{"container-0-request-1": 1, "container-1-request-1": 2},
			wantMappings: []v1.ContainerExtendedResourceRequest{m("a", "container-0-request-1"), m("b", "container-1-request-1")},
		},
		{
			name: "j follows the container's sorted request names",
			containers: []v1.Container{
				fx.Container("main", 100, v1.ResourceList{fx.GPUResource: fx.Count(1), implicitGPU: fx.Count(2)}),
			},
			// cpu, deviceclass.resource.kubernetes.io/gpu.example.com, example.com/gpu
			wantDevices:  3,
			wantRequests: map[string]int64{"container-0-request-1": 2, "container-0-request-2": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				{ContainerName: "main", ResourceName: string(implicitGPU), RequestName: "container-0-request-1"},
				{ContainerName: "main", ResourceName: gpu, RequestName: "container-0-request-2"},
			},
		},
		{
			name:         "container without a cpu request: j is 0",
			containers:   []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: gpus(1), Limits: gpus(1)}}},
			wantDevices:  1,
			wantRequests: map[string]int64{"container-0-request-0": 1},
			wantMappings: []v1.ContainerExtendedResourceRequest{m("main", "container-0-request-0")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cluster(t, 1, 8)
			placed := mustPlace(t, h, podWith("p", tc.init, tc.containers...), "node-0")

			claim := extendedClaim(h, placed)
			if got := deviceNames(claim); len(got) != tc.wantDevices {
				t.Errorf("devices = %v, want %d", got, tc.wantDevices)
			}
			if got := len(allocatedDevices(h)); got != tc.wantDevices {
				t.Errorf("snapshot counts %d devices taken, want %d", got, tc.wantDevices)
			}
			requests := map[string]int64{}
			for _, r := range claim.Spec.Devices.Requests {
				requests[r.Name] = r.Exactly.Count
			}
			if !maps.Equal(requests, tc.wantRequests) {
				t.Errorf("claim requests = %v, want %v", requests, tc.wantRequests)
			}
			got := placed.Status.ExtendedResourceClaimStatus.RequestMappings
			if !slices.Equal(got, tc.wantMappings) {
				t.Errorf("request mappings:\n got %s\nwant %s", fmtMappings(got), fmtMappings(tc.wantMappings))
			}
			for _, mp := range got {
				if _, ok := requests[mp.RequestName]; !ok {
					t.Errorf("mapping %s names request %q, not in the claim", fmtMappings([]v1.ContainerExtendedResourceRequest{mp}), mp.RequestName)
				}
			}
		})
	}
}

func fmtMappings(ms []v1.ContainerExtendedResourceRequest) string {
	out := ""
	for _, m := range ms {
		out += fmt.Sprintf("[%s %s -> %s] ", m.ContainerName, m.ResourceName, m.RequestName)
	}
	return out
}
