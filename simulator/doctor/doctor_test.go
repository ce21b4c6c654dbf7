package doctor

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/examples"
	"draxr.dev/draxr/simulator/input"
)

const gpuClass = `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  extendedResourceName: example.com/gpu
  selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
`

// newerClassAndOldJob: a newer class takes example.com/gpu over from
// gpuClass, and a pod still asks gpuClass's implicit name.
const newerClassAndOldJob = gpuClass + `---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: new-gpu.example.com, creationTimestamp: "2026-02-01T00:00:00Z"}
spec: {extendedResourceName: example.com/gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: old-job, namespace: ml}
spec:
  containers: [{name: c, image: x, resources: {limits: {deviceclass.resource.kubernetes.io/gpu.example.com: "1"}}}]
`

func node(name, extra string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Node
metadata: {name: %s}
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110"%s}
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"%s}
`, name, extra, extra)
}

func slice(name, nodeName, driver, pool string, count, devices int) string {
	var devs []string
	for i := range devices {
		devs = append(devs, fmt.Sprintf("{name: dev-%d}", i))
	}
	return fmt.Sprintf(`---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %s}
spec:
  driver: %s
  nodeName: %s
  pool: {name: %s, generation: 1, resourceSliceCount: %d}
  devices: [%s]
`, name, driver, nodeName, pool, count, strings.Join(devs, ", "))
}

func pod(name, uid, nodeName string, gpusPerContainer ...int) string {
	var cs []string
	for i, n := range gpusPerContainer {
		cs = append(cs, fmt.Sprintf(`  - name: c%d
    image: x
    resources: {requests: {example.com/gpu: "%d"}, limits: {example.com/gpu: "%d"}}`, i, n, n))
	}
	bind := ""
	if nodeName != "" {
		bind = "\n  nodeName: " + nodeName
	}
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: ml, uid: %s}
spec:%s
  containers:
%s
`, name, uid, bind, strings.Join(cs, "\n"))
}

func extendedClaim(name, ownerPod, ownerUID string) string {
	return fmt.Sprintf(`---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: %s
  namespace: ml
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: %s, uid: %s, controller: true}]
spec:
  devices:
    requests:
    - name: container-0-request-0
      exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}
`, name, ownerPod, ownerUID)
}

func load(t *testing.T, yaml string) *input.Objects {
	t.Helper()
	objs, err := input.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("input rejected: %v", err)
	}
	return objs
}

func TestCheck(t *testing.T) {
	longClass := strings.Repeat("a", 60) + ".example.com"
	tests := []struct {
		name  string
		input string
		// want lists, per expected finding, its check and the objects it
		// must name (Kind/[ns/]name); nil means clean.
		want       []wantFinding
		wantInText []string
	}{
		{
			name:  "clean DRA node and pods",
			input: gpuClass + node("gpu-0", "") + slice("gpu-0-gpu", "gpu-0", "gpu.example.com", "gpu-0", 1, 8) + pod("train", "u1", "gpu-0", 4) + extendedClaim("train-gpu", "train", "u1"),
		},
		{
			name:       "device plugin and DRA on one node",
			input:      gpuClass + node("gpu-0", `, example.com/gpu: "4"`) + slice("gpu-0-gpu", "gpu-0", "gpu.example.com", "gpu-0", 1, 8),
			want:       []wantFinding{{CheckDevicePluginAndDRA, Warning, []string{"Node/gpu-0", "DeviceClass/gpu.example.com"}}},
			wantInText: []string{"4 in allocatable", "8 devices of DeviceClass gpu.example.com"},
		},
		{
			name:  "device plugin node without DRA devices is fine",
			input: gpuClass + node("gpu-dp-0", `, example.com/gpu: "4"`) + slice("other", "gpu-dp-0", "nic.example.com", "gpu-dp-0", 1, 2),
		},
		{
			name: "device plugin and DRA in a node group template",
			input: gpuClass + `---
apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: mixed}
spec:
  minSize: 0
  maxSize: 2
  template:
    status: {capacity: {cpu: "8", memory: 32Gi, pods: "110", example.com/gpu: "2"}}
  resourceSlices:
  - driver: gpu.example.com
    devices: [{name: g0}, {name: g1}]
`,
			want: []wantFinding{{CheckDevicePluginAndDRA, Warning, []string{"NodeGroup/mixed", "DeviceClass/gpu.example.com"}}},
		},
		{
			name: "two classes map one name: the newest wins, not the first name",
			input: gpuClass + `---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: new-gpu.example.com, creationTimestamp: "2026-02-01T00:00:00Z"}
spec: {extendedResourceName: example.com/gpu}
`,
			want: []wantFinding{{CheckDuplicateExtendedName, Warning, []string{"DeviceClass/gpu.example.com", "DeviceClass/new-gpu.example.com"}}},
			wantInText: []string{"new-gpu.example.com wins", "clear it on gpu.example.com", "deviceclass.resource.kubernetes.io/gpu.example.com",
				"pods asking example.com/gpu get new-gpu.example.com's devices", "pods asking deviceclass.resource.kubernetes.io/gpu.example.com get gpu.example.com's devices"},
		},
		{
			name:  "the loser's implicit name in use while a stock kube-scheduler runs",
			input: newerClassAndOldJob + schedulerPod("registry.k8s.io/kube-scheduler:v1.37.2"),
			want: []wantFinding{
				{CheckDuplicateExtendedName, Error, []string{"DeviceClass/gpu.example.com", "DeviceClass/new-gpu.example.com", "Pod/ml/old-job"}},
				{CheckStockScheduler, Warning, []string{"Pod/kube-system/kube-scheduler-cp0"}},
			},
			wantInText: []string{"pods ml/old-job ask the implicit name deviceclass.resource.kubernetes.io/gpu.example.com while stock kube-scheduler kube-system/kube-scheduler-cp0 runs"},
		},
		{
			name:  "the loser's implicit name in use under draxr-scheduler is only the migration",
			input: newerClassAndOldJob + schedulerPod("registry.example/draxr-scheduler:v0.2.0"),
			want:  []wantFinding{{CheckDuplicateExtendedName, Warning, []string{"DeviceClass/gpu.example.com", "DeviceClass/new-gpu.example.com"}}},
		},
		{
			name: "device plugin and DRA: the finding names the class that backs the name",
			input: gpuClass + `---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: new-gpu.example.com, creationTimestamp: "2026-02-01T00:00:00Z"}
spec:
  extendedResourceName: example.com/gpu
  selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
` + node("gpu-0", `, example.com/gpu: "4"`) + slice("gpu-0-gpu", "gpu-0", "gpu.example.com", "gpu-0", 1, 8),
			want: []wantFinding{
				{CheckDevicePluginAndDRA, Warning, []string{"Node/gpu-0", "DeviceClass/new-gpu.example.com"}},
				{CheckDuplicateExtendedName, Warning, []string{"DeviceClass/gpu.example.com", "DeviceClass/new-gpu.example.com"}},
			},
			wantInText: []string{"8 devices of DeviceClass new-gpu.example.com"},
		},
		{
			name: "two classes map one name, same creation time: first name wins",
			input: `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: b-gpu, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {extendedResourceName: example.com/gpu}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: a-gpu, creationTimestamp: "2026-01-01T00:00:00Z"}
spec: {extendedResourceName: example.com/gpu}
`,
			want:       []wantFinding{{CheckDuplicateExtendedName, Warning, []string{"DeviceClass/a-gpu", "DeviceClass/b-gpu"}}},
			wantInText: []string{"a-gpu wins", "clear it on b-gpu"},
		},
		{
			name:       "resourceSliceCount larger than the slices",
			input:      gpuClass + node("gpu-0", "") + slice("gpu-0-a", "gpu-0", "gpu.example.com", "gpu-0", 2, 4),
			want:       []wantFinding{{CheckResourceSliceCount, Error, []string{"ResourceSlice/gpu-0-a"}}},
			wantInText: []string{"has 1 ResourceSlices but spec.pool.resourceSliceCount says 2"},
		},
		{
			name: "a pool is counted per driver",
			input: gpuClass + node("gpu-0", "") + slice("gpu-0-a", "gpu-0", "gpu.example.com", "gpu-0", 1, 4) +
				slice("gpu-0-nic", "gpu-0", "nic.example.com", "gpu-0", 1, 2),
		},
		{
			name: "two drivers' slices counted as one pool",
			input: gpuClass + node("gpu-0", "") + slice("gpu-0-a", "gpu-0", "gpu.example.com", "gpu-0", 2, 4) +
				slice("gpu-0-nic", "gpu-0", "nic.example.com", "gpu-0", 2, 2),
			want: []wantFinding{
				{CheckResourceSliceCount, Error, []string{"ResourceSlice/gpu-0-a"}},
				{CheckResourceSliceCount, Error, []string{"ResourceSlice/gpu-0-nic"}},
			},
		},
		{
			name:       "pod asks 33 devices across containers",
			input:      gpuClass + pod("huge", "u2", "", 32, 1),
			want:       []wantFinding{{CheckClaimDeviceLimit, Error, []string{"Pod/ml/huge"}}},
			wantInText: []string{"asks for 33", "example.com/gpu: 33"},
		},
		{
			name:  "pod asks exactly 32 devices",
			input: gpuClass + pod("at-limit", "u3", "", 16, 16),
		},
		{
			name:  "unmapped extended resource is not DRA-backed",
			input: strings.ReplaceAll(pod("dp-only", "u4", "", 40), "example.com/gpu", "example.com/fpga"),
		},
		{
			name: "init container reuses the devices of long-lived containers",
			input: gpuClass + `---
apiVersion: v1
kind: Pod
metadata: {name: init-reuse, namespace: ml}
spec:
  initContainers:
  - {name: setup, image: x, resources: {requests: {example.com/gpu: "30"}, limits: {example.com/gpu: "30"}}}
  containers:
  - {name: main, image: x, resources: {requests: {example.com/gpu: "30"}, limits: {example.com/gpu: "30"}}}
`,
		},
		{
			name: "sidecar devices add up",
			input: gpuClass + `---
apiVersion: v1
kind: Pod
metadata: {name: sidecar, namespace: ml}
spec:
  initContainers:
  - {name: side, image: x, restartPolicy: Always, resources: {requests: {example.com/gpu: "20"}, limits: {example.com/gpu: "20"}}}
  containers:
  - {name: main, image: x, resources: {requests: {example.com/gpu: "20"}, limits: {example.com/gpu: "20"}}}
`,
			want: []wantFinding{{CheckClaimDeviceLimit, Error, []string{"Pod/ml/sidecar"}}},
		},
		{
			name:       "extended-resource claim of a deleted pod",
			input:      gpuClass + extendedClaim("gone-gpu", "gone", "u9"),
			want:       []wantFinding{{CheckStaleExtendedClaim, Warning, []string{"ResourceClaim/ml/gone-gpu"}}},
			wantInText: []string{"pod ml/gone, which does not exist"},
		},
		{
			name:       "extended-resource claim of an earlier pod with the same name",
			input:      gpuClass + pod("train", "new-uid", "", 1) + extendedClaim("train-gpu", "train", "old-uid"),
			want:       []wantFinding{{CheckStaleExtendedClaim, Warning, []string{"ResourceClaim/ml/train-gpu"}}},
			wantInText: []string{"UID old-uid"},
		},
		{
			name: "class name too long for an implicit name",
			input: `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: ` + longClass + `}
spec: {}
`,
			want:       []wantFinding{{CheckInvalidImplicitName, Warning, []string{"DeviceClass/" + longClass}}},
			wantInText: []string{"deviceclass.resource.kubernetes.io/" + longClass, "63"},
		},
		{
			name:       "stock kube-scheduler with mapped names",
			input:      gpuClass + schedulerPod("registry.k8s.io/kube-scheduler:v1.37.2"),
			want:       []wantFinding{{CheckStockScheduler, Warning, []string{"Pod/kube-system/kube-scheduler-cp0"}}},
			wantInText: []string{"DeviceClasses gpu.example.com map"},
		},
		{
			name:  "draxr-scheduler is fine",
			input: gpuClass + schedulerPod("registry.example/draxr-scheduler:v0.1.0"),
		},
		{
			name:  "stock kube-scheduler without mapped names is fine",
			input: strings.Replace(gpuClass, "  extendedResourceName: example.com/gpu\n", "", 1) + schedulerPod("registry.k8s.io/kube-scheduler:v1.37.2"),
		},
		{
			name: "DeviceTaintRules taint every device of a node group",
			input: gpuClass + `---
apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: h100}
spec:
  minSize: 0
  maxSize: 2
  template:
    status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
  resourceSlices:
  - driver: gpu.example.com
    devices: [{name: g0}, {name: g1}]
---
apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: a100}
spec:
  minSize: 0
  maxSize: 2
  template:
    status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
  resourceSlices:
  - driver: gpu.example.com
    devices: [{name: g0}, {name: g1}, {name: g2}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: bad-g0}
spec:
  deviceSelector: {driver: gpu.example.com, device: g0}
  taint: {key: example.com/xid, effect: NoSchedule}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: bad-g1}
spec:
  deviceSelector: {device: g1}
  taint: {key: example.com/xid, effect: NoExecute}
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: only-a-note}
spec:
  deviceSelector: {device: g2}
  taint: {key: example.com/note, effect: None}
`,
			want:       []wantFinding{{CheckTaintRuleWholeGroup, Warning, []string{"NodeGroup/h100", "DeviceTaintRule/bad-g0", "DeviceTaintRule/bad-g1"}}},
			wantInText: []string{"taint all 2 devices of node group h100"},
		},
		{
			name: "class selector does not compile",
			input: `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: broken}
spec: {selectors: [{cel: {expression: device.driver == }}]}
`,
			want: []wantFinding{{CheckDeviceClassSelectorFail, Error, []string{"DeviceClass/broken"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(load(t, tt.input))
			assertFindings(t, got, tt.want)
			text := fmt.Sprint(got)
			for _, s := range tt.wantInText {
				if !strings.Contains(text, s) {
					t.Errorf("findings lack %q:\n%s", s, text)
				}
			}
			for _, f := range got {
				if f.Message == "" || f.Advice == "" {
					t.Errorf("finding %s lacks message or advice: %+v", f.Check, f)
				}
			}
		})
	}
}

type wantFinding struct {
	check    string
	severity Severity
	objects  []string
}

func assertFindings(t *testing.T, got []Finding, want []wantFinding) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d findings, want %d:\n%+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		var objs []string
		for _, o := range g.Objects {
			objs = append(objs, o.String())
		}
		if g.Check != w.check || g.Severity != w.severity || strings.Join(objs, " ") != strings.Join(w.objects, " ") {
			t.Errorf("finding %d = %s %s %v, want %s %s %v", i, g.Severity, g.Check, objs, w.severity, w.check, w.objects)
		}
	}
}

// The README example and the golden scenarios are healthy clusters, except
// the scenarios that plant a pitfall on purpose.
func TestExamplesAndScenarios(t *testing.T) {
	builtin, err := input.Parse(examples.Builtin, examples.BuiltinName)
	if err != nil {
		t.Fatal(err)
	}
	if got := Check(builtin); len(got) != 0 {
		t.Errorf("built-in example: %+v, want none", got)
	}

	deliberate := map[string][]wantFinding{
		// ml/too-many-devices asks for 33 devices on purpose.
		"claim-limit-33-devices": {{CheckClaimDeviceLimit, Error, []string{"Pod/ml/too-many-devices"}}},
		// The fpga.example.com selector is broken on purpose.
		"broken-cel-device-class": {{CheckDeviceClassSelectorFail, Error, []string{"DeviceClass/fpga.example.com"}}},
	}
	dirs, err := filepath.Glob("../offline/testdata/scenarios/*/input")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	for _, dir := range dirs {
		name := filepath.Base(filepath.Dir(dir))
		t.Run(name, func(t *testing.T) {
			objs, err := input.LoadPaths([]string{dir})
			if err != nil {
				t.Fatal(err)
			}
			got := Check(objs)
			assertFindings(t, got, deliberate[name])
			delete(deliberate, name)
		})
	}
	for name := range deliberate {
		t.Errorf("scenario %s with a deliberate pitfall was not checked", name)
	}
}

func schedulerPod(image string) string {
	return `---
apiVersion: v1
kind: Pod
metadata: {name: kube-scheduler-cp0, namespace: kube-system, labels: {component: kube-scheduler}}
spec:
  nodeName: cp0
  containers: [{name: kube-scheduler, image: "` + image + `"}]
`
}
