package clusterapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// dumpObjects is a management cluster's objects in two namespaces: a
// MachineDeployment whose template has status.capacity, its MachineSet and
// a Running Machine with a Ready node publishing slices; a MachineSet
// whose slices are in a ConfigMap; one whose ConfigMap is missing.
func dumpObjects() *input.Objects {
	md, tmpl := withInfraRef("a", "md", 1, "big"), fooTemplate("a", "big")
	ms := scalable(capi.MachineSet, "a", "md-x", 1, nil, nil, "md")
	m := machine("a", "m1", capi.MachineSet, "md-x", "test:///n1", "Running", false)
	fromCM := scalable(capi.MachineSet, "b", "ms", 0, bounds(0, 5, capi.TemplateSlicesConfigMapAnnotation, "tpl"), nil, "")
	gone := scalable(capi.MachineSet, "b", "gone", 0, bounds(0, 5, capi.TemplateSlicesConfigMapAnnotation, "gone"), nil, "")
	n1 := node("n1", "test:///n1", true)
	n1.Status.Conditions[0].LastTransitionTime = metav1.NewTime(metav1.Now().Add(-3600e9))
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpu"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To("n1"), Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "live-0"}, {Name: "live-1"}}}}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "b"}, Data: map[string]string{capi.TemplateSlicesKey: gpuSlices}}
	return &input.Objects{ClusterAPI: []*unstructured.Unstructured{md, tmpl, ms, m, fromCM, gone},
		Nodes: []*v1.Node{n1}, ResourceSlices: []*resourceapi.ResourceSlice{slice}, ConfigMaps: []*v1.ConfigMap{cm}}
}

// answers are what the loop and the planner ask of a provider.
func answers(t *testing.T, p *Provider) []string {
	t.Helper()
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range p.NodeGroups() {
		target, _ := g.TargetSize()
		node, tmplSlices, err := g.TemplateNodeInfo()
		if err != nil {
			t.Fatal(err)
		}
		devices := 0
		for _, s := range tmplSlices {
			devices += len(s.Spec.Devices)
		}
		instances, _ := g.Nodes()
		out = append(out, fmt.Sprintf("%s target %d cpu %s devices %d instances %d", g.Id(), target,
			node.Status.Capacity.Cpu(), devices, len(instances)))
	}
	var errs []string
	for id, err := range p.GroupErrors() {
		errs = append(errs, id+": "+err.Error())
	}
	slices.Sort(errs)
	return append(out, errs...)
}

// A provider over DumpSource answers as over an API server holding the
// same objects, with no client; auto-discovery's namespace is honoured.
func TestDumpReadsAsTheAPIServer(t *testing.T) {
	objs := dumpObjects()
	var dyn, kube []runtime.Object
	for _, u := range objs.ClusterAPI {
		dyn = append(dyn, u.DeepCopy())
	}
	kube = append(kube, objs.Nodes[0], objs.ResourceSlices[0], objs.ConfigMaps[0])
	f := newFake(t, dyn, kube...)
	gv := schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	mapper.Add(gv.WithKind("FooMachineTemplate"), meta.RESTScopeNamespace)
	src, err := DumpSource(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, discovery := range [][]string{nil, {"clusterapi:namespace=b"}} {
		api, err := New(Options{Dynamic: f.dyn, Kube: f.kube, Mapper: mapper, AutoDiscovery: discovery, TemplateCacheExpiry: DefaultTemplateCacheExpiry})
		if err != nil {
			t.Fatal(err)
		}
		dump, err := New(Options{Dump: src.Dump, AutoDiscovery: discovery, TemplateCacheExpiry: DefaultTemplateCacheExpiry})
		if err != nil {
			t.Fatal(err)
		}
		want, got := answers(t, api), answers(t, dump)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("discovery %v: over the dump\n%s\nover the API server\n%s", discovery, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if discovery == nil && (len(want) != 3 || !strings.Contains(want[0], "cpu 16 devices 2")) {
			t.Errorf("the API server's answers %q: want the MachineDeployment copied from its node, the ConfigMap's group and the missing ConfigMap's error", want)
		}
	}
}

// The provider over a dump writes nothing: a scale-up is refused naming
// the group, not sent to a client it does not have.
func TestDumpWritesNothing(t *testing.T) {
	src, err := DumpSource(dumpObjects())
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Dump: src.Dump})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var md cloudprovider.NodeGroup
	for _, g := range p.NodeGroups() {
		if g.Id() == "MachineDeployment/a/md" {
			md = g
		}
	}
	if md == nil {
		t.Fatalf("groups %v, want MachineDeployment/a/md", ids(p.NodeGroups()))
	}
	if err := md.IncreaseSize(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "MachineDeployment/a/md: the clusterapi provider reads a dump and writes nothing") {
		t.Errorf("IncreaseSize over a dump = %v, want it refused naming the group", err)
	}
	if err := md.DeleteNodes(context.Background(), []*v1.Node{node("n1", "test:///n1", true)}); err == nil || !strings.Contains(err.Error(), "reads a dump") {
		t.Errorf("DeleteNodes over a dump = %v, want it refused", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New with no clients and no dump: no error")
	}
}

// Objects no API server holds together are errors naming them.
func TestDumpSourceRefusesTwoOfOneName(t *testing.T) {
	objs := dumpObjects()
	objs.ClusterAPI = append(objs.ClusterAPI, objs.ClusterAPI[0].DeepCopy(), objs.ClusterAPI[1].DeepCopy())
	if _, err := DumpSource(objs); err == nil || !strings.Contains(err.Error(), "FooMachineTemplate a/big: metadata.name: two objects of this name") {
		t.Errorf("DumpSource with a template twice = %v, want an error naming it", err)
	}
	objs = dumpObjects()
	objs.ClusterAPI = append(objs.ClusterAPI, objs.ClusterAPI[0].DeepCopy())
	if _, err := DumpSource(objs); err == nil || !strings.Contains(err.Error(), "MachineDeployment a/md: metadata.name: two objects of this name") {
		t.Errorf("DumpSource with a MachineDeployment twice = %v, want an error naming it", err)
	}
}
