package doctor

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
)

// h100Cluster is two DynamicMIG H100 nodes of group "h100" with NVIDIA's
// classes and a claim template for a 1g.10gb partition.
func h100Cluster() *input.Objects {
	objs := &input.Objects{DeviceClasses: fx.NVIDIAClasses()}
	for _, name := range []string{"h100-a", "h100-b"} {
		n := fx.H100Node(name)
		n.Labels[nodegroup.GroupLabel] = "h100"
		objs.Nodes = append(objs.Nodes, n)
		objs.ResourceSlices = append(objs.ResourceSlices, fx.NVIDIADynamicMIG(name, 8)...)
	}
	objs.ResourceClaimTemplates = append(objs.ResourceClaimTemplates, fx.ClaimTemplate("small", "mig.nvidia.com", 1))
	return objs
}

// device returns a device of a slice by name.
func device(objs *input.Objects, slice, name string) *resourceapi.Device {
	for _, s := range objs.ResourceSlices {
		if s.Name != slice {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == name {
				return &s.Spec.Devices[i]
			}
		}
	}
	return nil
}

func findings(objs *input.Objects, check string) []Finding {
	var out []Finding
	for _, f := range Check(objs) {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// Real shapes are clean: NVIDIA DynamicMIG (counter sets in their own
// slice), static MIG, Gaudi 3, MI300X.
func TestDeviceChecksCleanOnRealShapes(t *testing.T) {
	objs := h100Cluster()
	objs.DeviceClasses = append(objs.DeviceClasses, fx.DriverClass("gaudi.intel.com"), fx.DriverClass("gpu.amd.com"))
	objs.ResourceSlices = append(objs.ResourceSlices, fx.NVIDIAStaticMIG("mig-a", 8, "3g.40gb", "3g.40gb"),
		fx.GaudiSlice("gaudi-a", 8), fx.MI300XSlice("mi300x-a", 8, 8))
	if got := Check(objs); len(got) != 0 {
		t.Errorf("findings on clean shapes: %+v", got)
	}
}

// A misspelt counter set, an undeclared counter and a consumption above
// the set's capacity are each named with slice, field and fix.
func TestDeviceCountersInvalid(t *testing.T) {
	objs := h100Cluster()
	device(objs, "h100-a-gpu.nvidia.com-1", fx.MIGName(0, "1g.10gb", 3)).ConsumesCounters[0].CounterSet = "gpu-0-counter-sets"
	bad := device(objs, "h100-a-gpu.nvidia.com-2", fx.MIGName(1, "2g.20gb", 0)).ConsumesCounters[0].Counters
	bad["multiprocesors"] = resourceapi.Counter{Value: resource.MustParse("32")}
	device(objs, "h100-b-gpu.nvidia.com-1", "gpu-0").ConsumesCounters[0].Counters["memory"] = resourceapi.Counter{Value: resource.MustParse("96Gi")}
	got := findings(objs, CheckDeviceCounters)
	want := []string{
		`ResourceSlice h100-a-gpu.nvidia.com-1: spec.devices[4].consumesCounters[0].counterSet: device gpu-0-mig-1g10gb-19-3 consumes counter set "gpu-0-counter-sets", which no slice of its pool declares`,
		`ResourceSlice h100-a-gpu.nvidia.com-2: spec.devices[12].consumesCounters[0].counters[multiprocesors]: device gpu-1-mig-2g20gb-14-0 consumes counter "multiprocesors" of counter set gpu-1-counter-set, which the set does not declare`,
		`ResourceSlice h100-b-gpu.nvidia.com-1: spec.devices[0].consumesCounters[0].counters[memory]: device gpu-0 consumes 96Gi of counter memory in counter set gpu-0-counter-set, which holds 80Gi`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d findings, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Message, w) || got[i].Severity != Error || got[i].Advice == "" {
			t.Errorf("finding %d:\n got %s (%s; advice %q)\nwant prefix %s", i, got[i].Message, got[i].Severity, got[i].Advice, w)
		}
	}
}

// A class renamed attribute matches nothing; a claim template and a pod
// naming a class that does not exist are errors naming the field.
func TestDeviceClassesMissingOrMatchingNothing(t *testing.T) {
	objs := h100Cluster()
	old := fx.DriverClass("h100-old")
	old.Spec.Selectors[0].CEL.Expression = `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].productName == "H100"`
	objs.DeviceClasses = append(objs.DeviceClasses, old)
	objs.ResourceClaimTemplates = append(objs.ResourceClaimTemplates, fx.ClaimTemplate("typo", "mig.nvidia.con", 1))
	objs.PendingPods = append(objs.PendingPods, fx.Pod("trainer", 100, fx.GPUs("deviceclass.resource.kubernetes.io/h200.nvidia.com", 2)))

	nothing := findings(objs, CheckClassMatchesNothing)
	if len(nothing) != 1 || nothing[0].Objects[0].Name != "h100-old" || !strings.Contains(nothing[0].Message, "spec.selectors match no device") {
		t.Errorf("class matching nothing: %+v", nothing)
	}
	missing := findings(objs, CheckClassMissing)
	var msgs []string
	for _, f := range missing {
		msgs = append(msgs, f.Message)
	}
	want := []string{
		`Pod/default/trainer: spec.containers[0].resources.requests[deviceclass.resource.kubernetes.io/h200.nvidia.com] (container main): DeviceClass "h200.nvidia.com" does not exist`,
		`ResourceClaimTemplate/default/typo: spec.spec.devices.requests[0].exactly.deviceClassName: DeviceClass "mig.nvidia.con" does not exist`,
	}
	joined := strings.Join(msgs, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("missing-class findings lack %q:\n%s", w, joined)
		}
	}
	if len(missing) != 2 {
		t.Errorf("got %d missing-class findings, want 2", len(missing))
	}
}

// One node of a group publishing a GPU fewer is told, naming both nodes.
func TestGroupDevicesDiffer(t *testing.T) {
	objs := h100Cluster()
	for _, s := range objs.ResourceSlices {
		if s.Name == "h100-b-gpu.nvidia.com-8" {
			s.Spec.Devices = s.Spec.Devices[:0]
		}
	}
	got := findings(objs, CheckGroupDevicesDiffer)
	if len(got) != 1 || !strings.Contains(got[0].Message, "h100-a: 152 devices; h100-b: 133 devices") || len(got[0].Objects) != 2 {
		t.Errorf("group devices differ: %+v", got)
	}
}
