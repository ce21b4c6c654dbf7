package capi

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/taints"
)

const eightGPUs = `
- driver: gpu.example.com
  devices:
  - {name: gpu-0, attributes: {model: {string: a100}}, capacity: {memory: {value: 80Gi}}}
  - {name: gpu-1}
- driver: nic.example.com
  sharedCounters:
  - name: ports
    counters: {bw: {value: "100"}}
  devices:
  - name: nic-0
    consumesCounters:
    - counterSet: ports
      counters: {bw: {value: "50"}}
`

func md(replicas int64, ann map[string]string) Resource {
	return Resource{Kind: MachineDeployment, Namespace: "ns", Name: "gpus", Annotations: ann, Replicas: &replicas}
}

func withSize(minSize, maxSize string, more map[string]string) map[string]string {
	a := map[string]string{MinSizeAnnotation: minSize, MaxSizeAnnotation: maxSize,
		CPUAnnotation: "8", MemoryAnnotation: "32Gi"}
	for k, v := range more {
		if v == "" {
			delete(a, k)
			continue
		}
		a[k] = v
	}
	return a
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name      string
		res       Resource
		configMap map[string]string
		live      *NodeCopy
		// wantNil: not a node group, as CA decides.
		wantNil    bool
		wantErr    string // substring; names object and annotation
		wantMin    int
		wantMax    int
		wantCap    v1.ResourceList
		wantLabels map[string]string
		wantTaints []v1.Taint
		wantSlices []string // driver:devices per slice
	}{
		{
			name:       "scale from zero with draxr slices of two drivers",
			res:        md(0, withSize("0", "5", map[string]string{TemplateSlicesAnnotation: eightGPUs, MaxPodsAnnotation: "64", DiskAnnotation: "100Gi"})),
			wantMax:    5,
			wantCap:    v1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi"), "pods": resource.MustParse("64"), "ephemeral-storage": resource.MustParse("100Gi")},
			wantSlices: []string{"gpu.example.com:2", "nic.example.com:1"},
		},
		{
			name:    "maxPods defaults to 110",
			res:     md(0, withSize("1", "3", nil)),
			wantMin: 1, wantMax: 3,
			wantCap: v1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi"), "pods": resource.MustParse("110")},
		},
		{
			name: "labels, taints and a typed GPU count as CA reads them",
			res: md(0, withSize("0", "2", map[string]string{LabelsAnnotation: "a=b, zone=z1", TaintsAnnotation: "gpu=true:NoSchedule,dedicated:NoExecute",
				GPUTypeAnnotation: "nvidia.com/gpu", GPUCountAnnotation: "4"})),
			wantMax:    2,
			wantCap:    v1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi"), "pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("4")},
			wantLabels: map[string]string{"a": "b", "zone": "z1", v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64"},
			wantTaints: []v1.Taint{{Key: "gpu", Value: "true", Effect: v1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: v1.TaintEffectNoExecute}},
		},
		{
			name:       "dra-driver with gpu-count: CA's synthetic slice when nothing better is given",
			res:        md(0, withSize("0", "2", map[string]string{DRADriverAnnotation: "gpu.example.com", GPUCountAnnotation: "3"})),
			wantMax:    2,
			wantSlices: []string{"gpu.example.com:3"},
		},
		{
			name:       "draxr slices win over dra-driver",
			res:        md(0, withSize("0", "2", map[string]string{DRADriverAnnotation: "other.example.com", GPUCountAnnotation: "3", TemplateSlicesAnnotation: eightGPUs})),
			wantMax:    2,
			wantSlices: []string{"gpu.example.com:2", "nic.example.com:1"},
		},
		{
			name:       "slices from a referenced ConfigMap",
			res:        md(0, withSize("0", "2", map[string]string{TemplateSlicesConfigMapAnnotation: "templates"})),
			configMap:  map[string]string{TemplateSlicesKey: eightGPUs},
			wantMax:    2,
			wantSlices: []string{"gpu.example.com:2", "nic.example.com:1"},
		},
		{
			name: "a ready node's slices are copied instead of the annotation's",
			res:  md(1, withSize("0", "2", map[string]string{TemplateSlicesAnnotation: eightGPUs})),
			live: &NodeCopy{
				Node: &v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{"cpu": resource.MustParse("16")}}},
				Slices: SliceSpecs([]*resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("n1"),
					Pool: resourceapi.ResourcePool{Name: "n1"}, Devices: []resourceapi.Device{{Name: "a"}, {Name: "b"}, {Name: "c"}}}}}),
			},
			wantMax:    2,
			wantCap:    v1.ResourceList{"cpu": resource.MustParse("16")},
			wantSlices: []string{"gpu.example.com:3"},
		},
		{
			name: "a ready node's copy leaves out CA's, condition, startup and status taints, the flags' too",
			res:  md(1, withSize("0", "2", nil)),
			live: &NodeCopy{
				Node: &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{
					{Key: "gpu", Value: "true", Effect: v1.TaintEffectNoSchedule},
					{Key: "DeletionCandidateOfClusterAutoscaler", Effect: v1.TaintEffectPreferNoSchedule},
					{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
					{Key: "startup-taint.cluster-autoscaler.kubernetes.io/driver", Effect: v1.TaintEffectNoSchedule},
					{Key: "node.cilium.io/agent-not-ready", Effect: v1.TaintEffectNoSchedule},
					{Key: "example.com/booting-disk", Effect: v1.TaintEffectNoSchedule},
					{Key: "example.com/maintenance-window", Effect: v1.TaintEffectPreferNoSchedule},
				}}, Status: v1.NodeStatus{Capacity: v1.ResourceList{"cpu": resource.MustParse("16")}}},
				Taints: taints.Config{StartupTaints: []string{"node.cilium.io/agent-not-ready"},
					StartupTaintPrefixes: []string{"example.com/booting-"}, StatusTaints: []string{"example.com/maintenance-window"}},
			},
			wantMax:    2,
			wantTaints: []v1.Taint{{Key: "gpu", Value: "true", Effect: v1.TaintEffectNoSchedule}},
		},
		{name: "max 0 is not a group", res: md(1, withSize("0", "0", nil)), wantNil: true},
		{name: "no annotations is not a group", res: md(1, nil), wantNil: true},
		{name: "0 replicas without cpu and memory is not a group (CA)", res: md(0, withSize("0", "3", map[string]string{CPUAnnotation: ""})), wantNil: true},
		{
			name:    "MachineSet owned by a MachineDeployment is not a group",
			res:     Resource{Kind: MachineSet, Namespace: "ns", Name: "ms", OwnedByMachineDeployment: true, Annotations: withSize("0", "3", nil)},
			wantNil: true,
		},
		{name: "min not an integer", res: md(0, withSize("x", "3", nil)), wantErr: "MachineDeployment ns/gpus: annotation " + MinSizeAnnotation + `: "x" is not an integer`},
		{name: "max below min", res: md(0, withSize("4", "3", nil)), wantErr: "annotation " + MaxSizeAnnotation + ": 3 is below the min size 4"},
		{name: "negative min", res: md(0, withSize("-1", "3", nil)), wantErr: "annotation " + MinSizeAnnotation + ": -1 is negative"},
		{name: "bad cpu", res: md(0, withSize("0", "3", map[string]string{CPUAnnotation: "eight"})), wantErr: "annotation " + CPUAnnotation + `: "eight" is not a quantity`},
		{name: "cpu with memory's suffix", res: md(0, withSize("0", "3", map[string]string{CPUAnnotation: "8Gi", MemoryAnnotation: "8Gi"})),
			wantErr: "MachineDeployment ns/gpus: annotation " + CPUAnnotation + `: "8Gi" is not a number of cores`},
		{name: "cpu beyond any node", res: md(0, withSize("0", "3", map[string]string{CPUAnnotation: "8G", MemoryAnnotation: "8Gi"})),
			wantErr: "MachineDeployment ns/gpus: annotation " + CPUAnnotation + `: "8G" is more than 100000 cores`},
		{name: "bad maxPods", res: md(0, withSize("0", "3", map[string]string{MaxPodsAnnotation: "1.5"})), wantErr: "annotation " + MaxPodsAnnotation},
		{name: "bad label", res: md(0, withSize("0", "3", map[string]string{LabelsAnnotation: "novalue"})), wantErr: "annotation " + LabelsAnnotation + `: "novalue" is not key=value`},
		{name: "bad taint effect", res: md(0, withSize("0", "3", map[string]string{TaintsAnnotation: "a=b:Never"})), wantErr: "annotation " + TaintsAnnotation},
		{name: "bad option", res: md(0, withSize("0", "3", map[string]string{nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime: "ten"})), wantErr: "annotation " + nodegroup.AutoscalingOptionsPrefix + "scaledownunneededtime"},
		{name: "slices not YAML", res: md(0, withSize("0", "3", map[string]string{TemplateSlicesAnnotation: "- driver: [x"})), wantErr: "annotation " + TemplateSlicesAnnotation + ": not a list of ResourceSliceSpecs"},
		{name: "slices with unknown field", res: md(0, withSize("0", "3", map[string]string{TemplateSlicesAnnotation: "- driver: d\n  devicez: []"})), wantErr: `unknown field "devicez"`},
		{name: "slices with nodeName", res: md(0, withSize("0", "3", map[string]string{TemplateSlicesAnnotation: "- {driver: d, nodeName: n, devices: [{name: a}]}"})), wantErr: "nodeName and pool are filled in per node"},
		{name: "slices without driver", res: md(0, withSize("0", "3", map[string]string{TemplateSlicesAnnotation: "- devices: [{name: a}]"})), wantErr: "[0].driver is required"},
		{name: "ConfigMap without the key", res: md(0, withSize("0", "3", map[string]string{TemplateSlicesConfigMapAnnotation: "other/templates"})), configMap: map[string]string{},
			wantErr: "annotation " + TemplateSlicesConfigMapAnnotation + `: ConfigMap other/templates has no key "resourceSlices"`},
		{name: "bad ConfigMap reference", res: md(0, withSize("0", "3", map[string]string{TemplateSlicesConfigMapAnnotation: "Not_A_Name"})), wantErr: "annotation " + TemplateSlicesConfigMapAnnotation},
		{name: "replicas but no template anywhere", res: md(2, withSize("0", "3", map[string]string{CPUAnnotation: ""})), wantErr: "MachineDeployment ns/gpus: no ready node to copy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.res, tc.configMap, tc.live)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNil {
				if g != nil {
					t.Fatalf("got group %s, want none", g.Planning.Name)
				}
				return
			}
			if g == nil {
				t.Fatal("got no group")
			}
			p := g.Planning
			if p.Name != "MachineDeployment/ns/gpus" {
				t.Errorf("name = %q", p.Name)
			}
			if p.Spec.MinSize != tc.wantMin || p.Spec.MaxSize != tc.wantMax {
				t.Errorf("size = [%d, %d], want [%d, %d]", p.Spec.MinSize, p.Spec.MaxSize, tc.wantMin, tc.wantMax)
			}
			if tc.wantCap != nil {
				if got := p.Spec.Template.Status.Capacity; !equalResources(got, tc.wantCap) {
					t.Errorf("capacity = %v, want %v", got, tc.wantCap)
				}
			}
			for k, v := range tc.wantLabels {
				if p.Spec.Template.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, p.Spec.Template.Labels[k], v)
				}
			}
			if tc.wantTaints != nil && !equalTaints(p.Spec.Template.Spec.Taints, tc.wantTaints) {
				t.Errorf("taints = %v, want %v", p.Spec.Template.Spec.Taints, tc.wantTaints)
			}
			var slices []string
			for _, s := range p.Spec.ResourceSlices {
				slices = append(slices, s.Driver+":"+itoa(len(s.Devices)))
			}
			if strings.Join(slices, " ") != strings.Join(tc.wantSlices, " ") {
				t.Errorf("slices = %v, want %v", slices, tc.wantSlices)
			}
			// The planner's instantiation fills nodeName and a per-driver pool.
			_, inst := p.NewNode("n-1")
			for _, s := range inst {
				if *s.Spec.NodeName != "n-1" || s.Spec.Pool.Name != "n-1" {
					t.Errorf("instantiated slice %s: nodeName %v pool %q", s.Name, s.Spec.NodeName, s.Spec.Pool.Name)
				}
			}
		})
	}
}

func TestOptions(t *testing.T) {
	r := md(0, map[string]string{
		nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUtilizationThreshold: "0.3",
		nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime:         "5m",
		nodegroup.AutoscalingOptionsPrefix + nodegroup.OptMaxNodeProvisionTime:          "20m",
		nodegroup.AutoscalingOptionsPrefix + "unknown":                                  "ignored",
	})
	o, err := r.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.ScaleDownUtilizationThreshold == nil || *o.ScaleDownUtilizationThreshold != 0.3 {
		t.Errorf("utilization = %v", o.ScaleDownUtilizationThreshold)
	}
	if o.ScaleDownUnneededTime == nil || *o.ScaleDownUnneededTime != 5*time.Minute {
		t.Errorf("unneeded = %v", o.ScaleDownUnneededTime)
	}
	if o.MaxNodeProvisionTime == nil || *o.MaxNodeProvisionTime != 20*time.Minute {
		t.Errorf("provision = %v", o.MaxNodeProvisionTime)
	}
	if o.ScaleDownUnreadyTime != nil || o.MaxNodeStartupTime != nil || o.ScaleDownGpuUtilizationThreshold != nil {
		t.Errorf("unset options must stay nil: %+v", o)
	}
	if _, err := md(0, map[string]string{nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUtilizationThreshold: "1.5"}).Options(); err == nil {
		t.Error("threshold 1.5 accepted")
	}
}

func TestFromUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": MachineSet,
		"metadata": map[string]any{"name": "ms", "namespace": "ns",
			"labels":          map[string]any{ClusterNameLabel: "from-label"},
			"ownerReferences": []any{map[string]any{"apiVersion": APIVersion, "kind": MachineDeployment, "name": "md", "uid": "u"}}},
		"spec": map[string]any{"replicas": int64(2), "clusterName": "c1"},
	}}
	r, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if r.ClusterName != "c1" || !r.OwnedByMachineDeployment || r.Replicas == nil || *r.Replicas != 2 || r.ID() != "MachineSet/ns/ms" {
		t.Errorf("got %+v", r)
	}
}

func equalResources(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func equalTaints(a, b []v1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value || a[i].Effect != b[i].Effect {
			return false
		}
	}
	return true
}

func itoa(n int) string { return resource.NewQuantity(int64(n), resource.DecimalSI).String() }

// The infrastructure template's status.capacity and status.nodeInfo make a
// group scalable from zero without annotations (CAPI's opt-in contract);
// the capacity annotations win per resource.
func TestInfraTemplateCapacity(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "FooMachineTemplate",
		"metadata": map[string]any{"name": "gpus", "namespace": "ns"},
		"status": map[string]any{
			"capacity": map[string]any{"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "ephemeral-storage": "100Gi"},
			"nodeInfo": map[string]any{"architecture": "arm64", "operatingSystem": "linux"},
		},
	}}
	infra, err := ReadInfraStatus(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]string{MinSizeAnnotation: "0", MaxSizeAnnotation: "3"}
	r := md(0, sizes)
	if g, err := Build(r, nil, nil); err != nil || g != nil {
		t.Fatalf("without annotations or template capacity: group %v, err %v; want no group (not scalable from zero)", g, err)
	}
	r.Infra = infra
	g, err := Build(r, nil, nil)
	if err != nil || g == nil {
		t.Fatalf("with the template's capacity: group %v, err %v; want a group", g, err)
	}
	node := g.Planning.Spec.Template
	want := map[v1.ResourceName]string{v1.ResourceCPU: "16", v1.ResourceMemory: "64Gi", "nvidia.com/gpu": "4",
		v1.ResourceEphemeralStorage: "100Gi", v1.ResourcePods: "110"}
	for name, q := range want {
		if got := node.Status.Capacity[name]; got.Cmp(resource.MustParse(q)) != 0 {
			t.Errorf("capacity[%s] = %s, want %s", name, got.String(), q)
		}
	}
	if node.Labels[v1.LabelArchStable] != "arm64" {
		t.Errorf("arch label %q, want arm64 from status.nodeInfo", node.Labels[v1.LabelArchStable])
	}
	// Annotations win.
	ann := map[string]string{MinSizeAnnotation: "0", MaxSizeAnnotation: "3", CPUAnnotation: "8", MaxPodsAnnotation: "50"}
	r = md(0, ann)
	r.Infra = infra
	g, err = Build(r, nil, nil)
	if err != nil || g == nil {
		t.Fatalf("group %v, err %v", g, err)
	}
	c := g.Planning.Spec.Template.Status.Capacity
	if c.Cpu().Cmp(resource.MustParse("8")) != 0 || c.Memory().Cmp(resource.MustParse("64Gi")) != 0 || c.Pods().Value() != 50 {
		t.Errorf("capacity cpu %s memory %s pods %s, want the annotation's 8 cpu and 50 pods, the template's 64Gi",
			c.Cpu(), c.Memory(), c.Pods())
	}

	bad := tmpl.DeepCopy()
	_ = unstructured.SetNestedField(bad.Object, "lots", "status", "capacity", "cpu")
	if _, err := ReadInfraStatus(bad); err == nil || !strings.Contains(err.Error(), "FooMachineTemplate ns/gpus: status.capacity[cpu]") {
		t.Errorf("bad quantity: error %v, want one naming the template and field", err)
	}
	_ = unstructured.SetNestedField(bad.Object, "16Gi", "status", "capacity", "cpu")
	if _, err := ReadInfraStatus(bad); err == nil || !strings.Contains(err.Error(), `status.capacity[cpu]: "16Gi" is not a number of cores`) {
		t.Errorf("cpu in bytes: error %v, want one naming the field and value", err)
	}
}

// cpu takes cores or millicores, up to any node's; memory any quantity.
func TestCapacityAnnotationUnits(t *testing.T) {
	for _, tc := range []struct{ cpu, memory string }{
		{"7500m", "8Gi"}, {"100000", "8G"}, {"0.5", "8589934592"}, {"1e3", "512Mi"},
	} {
		node, err := md(0, withSize("0", "3", map[string]string{CPUAnnotation: tc.cpu, MemoryAnnotation: tc.memory})).TemplateNode()
		if err != nil || node == nil {
			t.Errorf("cpu %q, memory %q: node %v, error %v; want a template", tc.cpu, tc.memory, node, err)
			continue
		}
		c := node.Status.Capacity
		if c.Cpu().Cmp(resource.MustParse(tc.cpu)) != 0 || c.Memory().Cmp(resource.MustParse(tc.memory)) != 0 {
			t.Errorf("capacity cpu %s memory %s, want %s and %s", c.Cpu(), c.Memory(), tc.cpu, tc.memory)
		}
	}
}

// A template copied from a live node leaves out its devices' taints (that
// node's health) and keeps every attribute, a serial included.
func TestSliceSpecsDropDeviceTaints(t *testing.T) {
	serial := resourceapi.DeviceAttribute{StringValue: ptr.To("1650921003123")}
	live := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
		Devices: []resourceapi.Device{
			{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"serial": serial},
				Taints: []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}},
			{Name: "gpu-1"},
		},
	}}
	specs := SliceSpecs([]*resourceapi.ResourceSlice{live})
	if len(specs) != 1 || len(specs[0].Devices) != 2 {
		t.Fatalf("specs = %+v", specs)
	}
	for _, d := range specs[0].Devices {
		if len(d.Taints) != 0 {
			t.Errorf("device %s keeps taints %v", d.Name, d.Taints)
		}
	}
	if got := specs[0].Devices[0].Attributes["serial"]; got.StringValue == nil || *got.StringValue != *serial.StringValue {
		t.Errorf("serial attribute = %+v, want it kept", got)
	}
	if specs[0].NodeName != nil || specs[0].Pool.Name != "" {
		t.Errorf("node name %v, pool %q: want them left for the new node", specs[0].NodeName, specs[0].Pool.Name)
	}
	if len(live.Spec.Devices[0].Taints) != 1 {
		t.Error("the live slice was changed")
	}
}

// The price annotation is a number >= 0; a bad one names the object and
// the annotation, and Build refuses the group as for any bad annotation.
func TestPrice(t *testing.T) {
	tests := []struct {
		name      string
		value     *string
		want      nodegroup.Price
		wantKnown bool
		wantErr   string
	}{
		{name: "unset is unknown"},
		{name: "a number", value: ptr.To("0.096"), want: "0.096", wantKnown: true},
		{name: "spaces around are fine", value: ptr.To(" 3.06 "), want: "3.06", wantKnown: true},
		{name: "zero", value: ptr.To("0"), want: "0", wantKnown: true},
		{name: "negative", value: ptr.To("-1"),
			wantErr: `MachineDeployment ns/gpus: annotation draxr.dev/node-price-per-hour: "-1" is negative`},
		{name: "not a number", value: ptr.To("$3"),
			wantErr: `MachineDeployment ns/gpus: annotation draxr.dev/node-price-per-hour: "$3" is not a number`},
		{name: "empty", value: ptr.To(""),
			wantErr: `MachineDeployment ns/gpus: annotation draxr.dev/node-price-per-hour: the value is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := withSize("0", "3", nil)
			if tt.value != nil {
				ann[PriceAnnotation] = *tt.value
			}
			r := md(1, ann)
			g, err := Build(r, nil, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("Build error = %v, want %q", err, tt.wantErr)
				}
				var ae *AnnotationError
				if !errors.As(err, &ae) || ae.Annotation != PriceAnnotation {
					t.Errorf("error %v is not an AnnotationError of %s", err, PriceAnnotation)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Planning.Spec.Price != tt.want {
				t.Errorf("spec.price = %q, want %q", g.Planning.Spec.Price, tt.want)
			}
			if _, known, _ := g.Planning.Spec.Price.Value(); known != tt.wantKnown {
				t.Errorf("known = %v, want %v", known, tt.wantKnown)
			}
		})
	}
}
