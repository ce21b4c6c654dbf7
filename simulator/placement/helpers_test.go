package placement

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// gpuClass is the name of the fixtures' class mapping example.com/gpu.
const gpuClass = "gpu.example.com"

// implicitGPU is the implicit extended resource name of gpuClass.
const implicitGPU v1.ResourceName = "deviceclass.resource.kubernetes.io/" + gpuClass

// newEngine builds the default-profile engine over snap.
func newEngine(t testing.TB, snap *snapshot.Snapshot) *Engine {
	t.Helper()
	h, err := New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// addNode adds a node (64 cores, 256 GiB, extra allocatable) with slices.
func addNode(t testing.TB, snap *snapshot.Snapshot, name string, extra v1.ResourceList, slices ...*resourceapi.ResourceSlice) {
	t.Helper()
	if err := snap.AddNode(fx.Node(name, 64, 256, extra)); err != nil {
		t.Fatal(err)
	}
	for _, s := range slices {
		if err := snap.AddResourceSlice(s); err != nil {
			t.Fatal(err)
		}
	}
}

// mustPlace places pod on node or fails the test.
func mustPlace(t testing.TB, h *Engine, pod *v1.Pod, node string) *v1.Pod {
	t.Helper()
	placed, ferr := h.Place(pod, node)
	if ferr != nil {
		t.Fatalf("place %s on %s: %v", pod.Name, node, ferr)
	}
	return placed
}

// deviceNames lists a claim's allocated devices as "driver/pool/device".
func deviceNames(claim *resourceapi.ResourceClaim) []string {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		out = append(out, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	slices.Sort(out)
	return out
}

// allocatedDevices lists every device the snapshot counts as taken.
func allocatedDevices(h *Engine) []string {
	var out []string
	for id := range h.snap.AllocatedDeviceIDs() {
		out = append(out, id.String())
	}
	slices.Sort(out)
	return out
}

// extendedClaim returns the placed pod's extended-resource claim, or nil.
func extendedClaim(h *Engine, pod *v1.Pod) *resourceapi.ResourceClaim {
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		return nil
	}
	return h.snap.ResourceClaim(pod.Namespace, st.ResourceClaimName)
}

// podsOn lists the names of the pods on a node, in the node's order.
func podsOn(h *Engine, node string) []string {
	var out []string
	for _, p := range h.snap.NodeInfo(node).Pods {
		out = append(out, p.GetPod().Name)
	}
	return out
}

// podCounts counts pods per node.
func podCounts(h *Engine) map[string]int {
	out := map[string]int{}
	for _, n := range h.snap.NodeNames() {
		out[n] = len(h.snap.NodeInfo(n).Pods)
	}
	return out
}

// wantErrContains checks that err is set and its text has every part.
func wantErrContains(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// podWith returns a pod from explicit init and regular containers.
func podWith(name string, init []v1.Container, containers ...v1.Container) *v1.Pod {
	p := fx.Pod(name, 0, nil)
	p.Spec.InitContainers = init
	p.Spec.Containers = containers
	return p
}
