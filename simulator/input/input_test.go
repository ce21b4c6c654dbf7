package input

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func mustParse(t *testing.T, src string) *Objects {
	t.Helper()
	o, err := Parse([]byte(src), "in.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return o
}

func counts(o *Objects) map[string]int {
	return map[string]int{
		"Node": len(o.Nodes), "RunningPod": len(o.RunningPods), "PendingPod": len(o.PendingPods),
		"ResourceSlice": len(o.ResourceSlices), "DeviceClass": len(o.DeviceClasses),
		"ResourceClaim": len(o.ResourceClaims), "ResourceClaimTemplate": len(o.ResourceClaimTemplates),
		"NodeGroup": len(o.NodeGroups),
	}
}

func TestEachKindLoads(t *testing.T) {
	tests := []struct {
		kind, src string
	}{
		{"Node", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: '4'}}"},
		{"RunningPod", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: n1, containers: [{name: c, image: busybox}]}"},
		{"PendingPod", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: busybox}]}"},
		{"ResourceSlice", `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec: {driver: gpu.example.com, nodeName: n1, pool: {name: n1, resourceSliceCount: 1}, devices: [{name: gpu-0}]}`},
		{"DeviceClass", `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {extendedResourceName: example.com/gpu, selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}`},
		{"ResourceClaim", `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}`},
		{"ResourceClaimTemplate", `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t}
spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}}`},
		{"NodeGroup", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: gpu}
spec:
  minSize: 0
  maxSize: 3
  template: {metadata: {labels: {pool: gpu}}, status: {capacity: {cpu: "8", pods: "110"}}}
  resourceSlices: [{driver: gpu.example.com, devices: [{name: gpu-0}, {name: gpu-1}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			got := counts(mustParse(t, tt.src))
			for kind, n := range got {
				want := 0
				if kind == tt.kind {
					want = 1
				}
				if n != want {
					t.Errorf("%s: got %d objects, want %d", kind, n, want)
				}
			}
		})
	}
}

func TestKubectlDump(t *testing.T) {
	o, err := LoadPaths([]string{"testdata/dump.yaml"})
	if err != nil {
		t.Fatalf("LoadPaths: %v", err)
	}
	want := map[string]int{"Node": 1, "RunningPod": 3, "PendingPod": 1, "ResourceSlice": 1, "DeviceClass": 1,
		"ResourceClaim": 1, "ResourceClaimTemplate": 1, "NodeGroup": 0}
	for kind, n := range counts(o) {
		if n != want[kind] {
			t.Errorf("%s: got %d, want %d (the Succeeded pod must be dropped)", kind, n, want[kind])
		}
	}
	run := o.RunningPods[0]
	if run.UID != "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9" || run.Status.ExtendedResourceClaimStatus == nil {
		t.Errorf("running pod lost its UID or status: %+v", run.Status)
	}
	if o.ResourceClaims[0].Status.Allocation == nil {
		t.Errorf("claim lost its allocation")
	}
	// Defaulting of the claim template's request, as the API server does.
	if r := o.ResourceClaimTemplates[0].Spec.Spec.Devices.Requests[0].Exactly; r.AllocationMode != "ExactCount" || r.Count != 1 {
		t.Errorf("template request not defaulted: %+v", r)
	}
	wantTime := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	if got := o.DeviceClasses[0].CreationTimestamp.Time; !got.Equal(wantTime) {
		t.Errorf("DeviceClass creationTimestamp = %v, want %v", got, wantTime)
	}
}

func TestTypedListAndJSON(t *testing.T) {
	src := `{"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "5"}, "items": [
		{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
	{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "c"}}`
	o, err := Parse([]byte(src), "nodes.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(o.Nodes))
	}
}

func TestEmptyDocumentsAndNumbering(t *testing.T) {
	src := "# leading comment\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Nope\n---\n"
	_, err := Parse([]byte(src), "e.yaml")
	if err == nil || !strings.Contains(err.Error(), "e.yaml: document 3: ") {
		t.Fatalf("want the error in document 3 (empty documents count, a leading --- does not), got %v", err)
	}
}

func TestPodDefaults(t *testing.T) {
	o := mustParse(t, `apiVersion: v1
kind: Pod
metadata: {name: p, creationTimestamp: "2026-03-04T05:06:07Z"}
spec:
  containers:
  - name: c
    image: busybox
    resources: {limits: {example.com/gpu: "2", cpu: "1"}}`)
	pod := o.PendingPods[0]
	req := pod.Spec.Containers[0].Resources.Requests
	if q := req["example.com/gpu"]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("requests[example.com/gpu] = %v, want 2 (copied from limits)", req)
	}
	if pod.Namespace != "default" || pod.Spec.SchedulerName != "default-scheduler" {
		t.Errorf("namespace %q, schedulerName %q: defaults missing", pod.Namespace, pod.Spec.SchedulerName)
	}
	if pod.UID == "" || pod.UID != mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}").PendingPods[0].UID {
		t.Errorf("UID %q is not deterministic", pod.UID)
	}
	want := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	if !pod.CreationTimestamp.Equal(&want) {
		t.Errorf("creationTimestamp = %v, want %v", pod.CreationTimestamp, want)
	}
}

func TestNodeGroupAllocatableDefault(t *testing.T) {
	o := mustParse(t, `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {status: {capacity: {cpu: "8"}, allocatable: {}}}}`)
	if q := o.NodeGroups[0].Spec.Template.Status.Allocatable[v1.ResourceCPU]; q.String() != "8" {
		t.Errorf("allocatable cpu = %v, want 8", q.String())
	}
}

func TestBrokenCELDeviceClassLoads(t *testing.T) {
	class := `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: broken}
spec: {selectors: [{cel: {expression: 'device.driver ==== '}}]}`
	if o := mustParse(t, class); len(o.DeviceClasses) != 1 {
		t.Fatalf("class not loaded")
	}
	// A claim with the same selector is still refused, as by the API server.
	_, err := Parse([]byte(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: broken, selectors: [{cel: {expression: 'device.driver ==== '}}]}}]}}`), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "spec.devices.requests[0].exactly.selectors[0].cel.expression") {
		t.Fatalf("want the claim's CEL error, got %v", err)
	}
}

func TestDumpWithEphemeralContainer(t *testing.T) {
	data, err := os.ReadFile("testdata/debugged-pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if o, err := Parse(data, "debugged-pod.yaml"); err != nil || len(o.RunningPods) != 1 {
		t.Fatalf("Parse: %v", err)
	}
}

// TestListOfManyPods: a List's pods, which are prepared on every core,
// arrive in the order of the items and as separate documents bring them,
// and their errors are reported in that order, each naming its item.
func TestListOfManyPods(t *testing.T) {
	const n = 300 // several chunks of items per core
	var docs, list strings.Builder
	list.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := 0; i < n; i++ {
		node := ""
		if i%3 == 0 {
			node = "nodeName: node-1, "
		}
		cpu := "1"
		if i == 7 || i == 250 {
			cpu = "lots" // a bad quantity
		}
		pod := fmt.Sprintf("{apiVersion: v1, kind: Pod, metadata: {name: p-%03d}, spec: {%scontainers: [{name: c, image: x, resources: {requests: {cpu: '%s'}}}]}}", i, node, cpu)
		fmt.Fprintf(&docs, "---\n%s\n", pod)
		fmt.Fprintf(&list, "- %s\n", pod)
	}
	_, err := Parse([]byte(list.String()), "list.yaml")
	if err == nil {
		t.Fatal("no error for the two bad quantities")
	}
	want := []string{
		`list.yaml: document 1: items[7]: Pod p-007: spec.containers[0].resources.requests[cpu]: invalid value "lots"`,
		`list.yaml: document 1: items[250]: Pod p-250: spec.containers[0].resources.requests[cpu]: invalid value "lots"`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("errors:\n%v\nwant %d", err, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("error %d: %s\nwant it to start with %s", i, lines[i], want[i])
		}
	}

	// Without the bad items, the List loads as the documents do.
	good := func(s string) []byte {
		return []byte(strings.ReplaceAll(s, "'lots'", "'1'"))
	}
	fromList, err := Parse(good(list.String()), "list.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromDocs, err := Parse(good(docs.String()), "docs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	names := func(pods []*v1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name+"@"+p.Spec.NodeName)
		}
		return out
	}
	if got, want := names(fromList.PendingPods), names(fromDocs.PendingPods); !slices.Equal(got, want) || len(got) != n-n/3 {
		t.Errorf("pending pods from the List %v,\nfrom documents %v", got, want)
	}
	if got, want := names(fromList.RunningPods), names(fromDocs.RunningPods); !slices.Equal(got, want) || len(got) != n/3 {
		t.Errorf("running pods from the List %v,\nfrom documents %v", got, want)
	}
}
