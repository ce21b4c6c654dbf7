package input

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: busybox}]}\n"

// aliasBomb is "billion laughs": 9 levels of 9 references, ~387M nodes if
// expanded.
const aliasBomb = `apiVersion: v1
kind: Pod
metadata: {name: bomb}
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func TestBadInput(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // all must appear in the error
	}{
		{"malformed YAML", goodPod + "---\nkind: Pod\n  metadata: x: y\n",
			[]string{"bad.yaml: document 2: malformed YAML: yaml: line 7: mapping values"}},
		{"malformed JSON in YAML", goodPod + "---\n{\"kind\": \"Pod\",,}\n",
			[]string{"bad.yaml: document 2: malformed YAML"}},
		{"typo in a kind the planner reads", goodPod + "---\napiVersion: v1\nkind: Pdo\nmetadata: {name: s}\n",
			[]string{"bad.yaml: document 2: ", `unsupported kind "Pdo" in apiVersion "v1"`}},
		{"typo in a workload kind", goodPod + "---\napiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: s}\n",
			[]string{"bad.yaml: document 2: ", `unsupported kind "Deploymnet" in apiVersion "apps/v1"`}},
		{"a kind the planner reads, in another version", goodPod + "---\napiVersion: resource.k8s.io/v1beta2\nkind: ResourceSlice\nmetadata: {name: s}\n",
			[]string{"bad.yaml: document 2: ", `unsupported kind "ResourceSlice" in apiVersion "resource.k8s.io/v1beta2"`}},
		{"unknown apiVersion", "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: c}\n",
			[]string{"bad.yaml: document 1: ", `"DeviceClass" in apiVersion "resource.k8s.io/v1beta1"`}},
		{"DeviceTaintRule with an unknown effect", "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: bad}\nspec: {deviceSelector: {driver: gpu.example.com}, taint: {key: example.com/x, effect: Sometimes}}\n",
			[]string{"bad.yaml: document 1: DeviceTaintRule bad: ", `spec.taint.effect: Unsupported value: "Sometimes"`}},
		{"missing kind", "metadata: {name: x}\n",
			[]string{"bad.yaml: document 1: apiVersion and kind are required"}},
		{"duplicate", goodPod + "---\n" + goodPod,
			[]string{"bad.yaml: document 2: duplicate Pod default/p (first defined at bad.yaml: document 1)"}},
		{"duplicate in List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: node1}}\n" +
			"- {apiVersion: v1, kind: Node, metadata: {name: node1}}\n",
			[]string{"bad.yaml: document 1: items[1]: duplicate Node node1 (first defined at bad.yaml: document 1: items[0])"}},
		{"replicas is a string", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: three}\n",
			[]string{"bad.yaml: document 1: Deployment d: ", "spec.replicas", "int32"}},
		{"string where a list belongs", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: nginx}\n",
			[]string{"bad.yaml: document 1: Pod p: ", "spec.containers of type []v1.Container"}},
		{"unknown field", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}], colour: red}\n",
			[]string{"bad.yaml: document 1: Pod p: ", `unknown field "spec.colour"`}},
		{"bad quantity in a List item", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: node1}}\n" +
			"- {apiVersion: v1, kind: Node, metadata: {name: node2}, status: {capacity: {cpu: 'four'}}}\n",
			[]string{`bad.yaml: document 1: items[1]: Node node2: status.capacity[cpu]: invalid value "four": quantities must match`}},
		{"bad timestamp", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c, creationTimestamp: yesterday}\n",
			[]string{`bad.yaml: document 1: DeviceClass c: metadata.creationTimestamp: invalid value "yesterday"`}},
		{"duplicate field", "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nmetadata: {name: node2}\n",
			[]string{"bad.yaml: document 1: malformed YAML", `"metadata" already set`}},
		{"alias bomb", aliasBomb, []string{"bad.yaml: document 1: malformed YAML", "excessive aliasing"}},
		{"NodeGroup min > max", "apiVersion: draxr.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {minSize: 3, maxSize: 1, template: {}}\n",
			[]string{"bad.yaml: document 1: NodeGroup g: spec.maxSize: Invalid value: 1: must be >= minSize (3)"}},
		{"NodeGroup negative price", "apiVersion: draxr.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {minSize: 0, maxSize: 1, price: -1, template: {}}\n",
			[]string{`bad.yaml: document 1: NodeGroup g: spec.price: Invalid value: "-1": must be a number >= 0: one node's price per hour`}},
		{"NodeGroup price not a number", "apiVersion: draxr.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {minSize: 0, maxSize: 1, price: 'USD 3', template: {}}\n",
			[]string{`bad.yaml: document 1: NodeGroup g: spec.price: Invalid value: "USD 3": must be a number >= 0`}},
		{"NodeGroup duplicate device names", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {}, resourceSlices: [{driver: gpu.example.com, devices: [{name: gpu-0}, {name: gpu-0}]}]}
`, []string{"bad.yaml: document 1: NodeGroup g: spec.resourceSlices[0].devices[1].name: Duplicate value"}},
		{"NodeGroup slice with shared counters and devices", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {}, resourceSlices: [{driver: gpu.example.com, sharedCounters: [{name: mem, counters: {memory: {value: 80Gi}}}], devices: [{name: gpu-0}]}]}
`, []string{"bad.yaml: document 1: NodeGroup g: spec.resourceSlices[0]"}},
		{"NodeGroup device consuming a misspelt counter set", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {}, resourceSlices: [{driver: gpu.example.com, sharedCounters: [{name: gpu-0-counter-set, counters: {memory: {value: 80Gi}}}]}, {driver: gpu.example.com, devices: [{name: gpu-0, consumesCounters: [{counterSet: gpu-0-countr-set, counters: {memory: {value: 80Gi}}}]}]}]}
`, []string{`bad.yaml: document 1: NodeGroup g: spec.resourceSlices[1].devices[0].consumesCounters[0].counterSet: Invalid value: device gpu-0 consumes counter set "gpu-0-countr-set", which no slice of its pool declares in spec.sharedCounters (declared: gpu-0-counter-set); name a declared counter set`}},
		{"NodeGroup device consuming more than its counter set", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {}, resourceSlices: [{driver: gpu.example.com, sharedCounters: [{name: gpu-0-counter-set, counters: {memory: {value: 80Gi}}}]}, {driver: gpu.example.com, devices: [{name: gpu-0, consumesCounters: [{counterSet: gpu-0-counter-set, counters: {memory: {value: 96Gi}}}]}]}]}
`, []string{`NodeGroup g: spec.resourceSlices[1].devices[0].consumesCounters[0].counters[memory]: Invalid value: device gpu-0 consumes 96Gi of counter memory in counter set gpu-0-counter-set, which holds 80Gi: it can never be allocated`}},
		{"NodeGroup slice for all nodes", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {}, resourceSlices: [{driver: gpu.example.com, allNodes: true, devices: [{name: gpu-0}]}]}
`, []string{"bad.yaml: document 1: NodeGroup g: spec.resourceSlices[0].allNodes: Invalid value: true: a template slice describes the new node's own devices"}},
		{"NodeGroup slice with a node selector", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {}, resourceSlices: [{driver: gpu.example.com, nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}]}, devices: [{name: gpu-0}]}]}
`, []string{"bad.yaml: document 1: NodeGroup g: spec.resourceSlices[0].nodeSelector: Invalid value"}},
		{"NodeGroup bad template label", `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g}
spec: {minSize: 0, maxSize: 1, template: {metadata: {labels: {"bad key!": x}}}}
`, []string{"bad.yaml: document 1: NodeGroup g: spec.template.metadata.labels: Invalid value"}},
		{"container without image", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
			[]string{"bad.yaml: document 1: Pod default/p: spec.containers[0].image: Required value"}},
		{"bad pod name", "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {containers: [{name: c, image: x}]}\n",
			[]string{"bad.yaml: document 1: Pod default/Bad_Name: metadata.name: Invalid value"}},
		{"bad node quantity", "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nstatus: {capacity: {cpu: '-1'}}\n",
			[]string{"bad.yaml: document 1: Node node1: status.capacity.cpu: Invalid value"}},
		{"bad slice", "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d.example.com, pool: {name: p, resourceSliceCount: 1}}\n",
			[]string{"bad.yaml: document 1: ResourceSlice s: spec: Required value: exactly one of `nodeName`"}},
		{"bad class name", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: Bad_Class}\n",
			[]string{"bad.yaml: document 1: DeviceClass Bad_Class: metadata.name: Invalid value"}},
		{"claim request without class", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {}}]}}\n",
			[]string{"bad.yaml: document 1: ResourceClaim default/c: spec.devices.requests[0].exactly.deviceClassName: Required value"}},
		{"template bad request name", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec: {spec: {devices: {requests: [{name: R_1, exactly: {deviceClassName: c}}]}}}\n",
			[]string{"bad.yaml: document 1: ResourceClaimTemplate default/t: spec.spec.devices.requests[0].name: Invalid value"}},
		{"invalid workload", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: c}}, spec: {containers: [{name: c, image: x}]}}}\n",
			[]string{"bad.yaml: document 1: Deployment default/d: spec.template.metadata.labels: Invalid value"}},
		{"too many replicas", "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: d}\nspec: {replicas: 1000000000, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n",
			[]string{"bad.yaml: document 1: ReplicaSet default/d: 1000000000 pods exceed the limit"}},
		{"workload pod clashes with a pod", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n---\n" +
			"apiVersion: v1\nkind: Pod\nmetadata: {name: db-0}\nspec: {containers: [{name: c, image: busybox}]}\n",
			[]string{"bad.yaml: document 2: duplicate Pod default/db-0 (first defined at bad.yaml: document 1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The alias bomb and the replica limit are refused by their
			// error text, not by timing: without those guards Parse
			// expands hundreds of millions of nodes or pods and the run
			// ends in the test timeout or out of memory.
			o, err := Parse([]byte(tt.src), "bad.yaml")
			if err == nil {
				t.Fatalf("no error; loaded %v", counts(o))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestAllErrorsOfAFile(t *testing.T) {
	src := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\n" +
		"apiVersion: v1\nkind: Thing\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c}]}\n"
	_, err := Parse([]byte(src), "many.yaml")
	for _, w := range []string{"many.yaml: document 1: Pod default/a:", "many.yaml: document 2: unsupported",
		"many.yaml: document 3: Pod default/b:"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in %v", w, err)
		}
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("a/nodes.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
	write("a/sub/pods.yml", goodPod)
	write("a/notes.txt", "not an input")
	o, err := LoadPaths([]string{filepath.Join(dir, "a"), filepath.Join(dir, "a/nodes.yaml")})
	if err != nil {
		t.Fatalf("LoadPaths: %v", err)
	}
	if len(o.Nodes) != 1 || len(o.PendingPods) != 1 {
		t.Fatalf("got %v", counts(o))
	}

	dup := write("b/more-pods.yaml", "# again\n---\n"+goodPod)
	_, err = LoadPaths([]string{filepath.Join(dir, "a"), dup})
	want := dup + ": document 1: duplicate Pod default/p (first defined at " + filepath.Join(dir, "a/sub/pods.yml") + ": document 1)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("want %q, got %v", want, err)
	}

	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSize + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	if _, err := LoadPaths([]string{big}); err == nil || !strings.Contains(err.Error(), big+": file is") {
		t.Errorf("want a size error naming %s, got %v", big, err)
	}
	if _, err := LoadPaths([]string{filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Errorf("want an error for a missing file")
	}
}

func TestMergeDuplicateWorkload(t *testing.T) {
	src := "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: r}\nspec: {replicas: 2, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n"
	a, _ := Parse([]byte(src), "a.yaml")
	b, _ := Parse([]byte(src), "b.yaml")
	err := a.Merge(b)
	if err == nil || !strings.Contains(err.Error(), "b.yaml: document 1: duplicate ReplicaSet default/r (first defined at a.yaml: document 1)") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "duplicate Pod") || len(a.PendingPods) != 2 {
		t.Errorf("the duplicate workload's pods must be skipped silently: %v, %d pods", err, len(a.PendingPods))
	}
}

func TestMaxPodsPerWorkloadOption(t *testing.T) {
	const rs = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web}\nspec: {replicas: 3, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n"
	tests := []struct {
		name string
		opts Options
		want string // the outcome: pods loaded, or (part of) the error
	}{
		{"default limit", Options{}, "3 pending pods"},
		{"limit at the replica count", Options{MaxPodsPerWorkload: 3}, "3 pending pods"},
		{"limit below the replica count", Options{MaxPodsPerWorkload: 2},
			"rs.yaml: document 1: ReplicaSet default/web: 3 pods exceed the limit of 2 pods per workload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.opts.Parse([]byte(rs), "rs.yaml")
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = fmt.Sprintf("%d pending pods", len(o.PendingPods))
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// Create and status-update checks both validate metadata; a user sees each
// bad field once.
func TestMetadataErrorReportedOnce(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"pod label", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {\"bad label\": x}}\nspec: {containers: [{name: c, image: x}]}\n",
			`metadata.labels: Invalid value: "bad label"`},
		{"claim annotation", "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, annotations: {\"bad key!\": x}}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}\n",
			`metadata.annotations: Invalid value: "bad key!"`},
		{"pod owner reference", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, ownerReferences: [{apiVersion: v1, kind: '', name: o, uid: u}]}\nspec: {containers: [{name: c, image: x}]}\n",
			`metadata.ownerReferences[0].kind: Required value: must not be empty`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "bad.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if n := strings.Count(err.Error(), tt.want); n != 1 {
				t.Errorf("%q appears %d times, want once:\n%v", tt.want, n, err)
			}
		})
	}
}

// -f - reads standard input, as kubectl does, beside files.
func TestLoadStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = saved; r.Close() })
	go func() {
		_, _ = w.WriteString("apiVersion: v1\nkind: Node\nmetadata: {name: from-stdin}\n")
		w.Close()
	}()
	file := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(file, []byte(goodPod), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := LoadPaths([]string{Stdin, file})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Nodes) != 1 || o.Nodes[0].Name != "from-stdin" || len(o.PendingPods) != 1 {
		t.Errorf("got %v, want the node from stdin and the pod from the file", counts(o))
	}
}

// A NodeGroup's price loads as a number or a string.
func TestNodeGroupPrice(t *testing.T) {
	for _, price := range []string{"0.25", "'0.25'"} {
		src := "apiVersion: draxr.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {minSize: 0, maxSize: 1, price: " + price + ", template: {}}\n"
		o, err := Parse([]byte(src), "g.yaml")
		if err != nil {
			t.Fatalf("price %s: %v", price, err)
		}
		if got, known, err := o.NodeGroups[0].Spec.Price.Value(); got != 0.25 || !known || err != nil {
			t.Errorf("price %s read as %v, %v, %v; want 0.25", price, got, known, err)
		}
	}
}
