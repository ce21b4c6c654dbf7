package clusterapi

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// With WatchUntil the kinds read every loop come from watches: the first
// Refresh lists each kind once to find its served version (and each
// watch lists once as it starts), later ones send no LIST, and a group
// scaled meanwhile is seen through the watch.
func TestRefreshReadsWatches(t *testing.T) {
	f := newFake(t, []runtime.Object{
		scalable(capi.MachineDeployment, "ns1", "gpu", 1, bounds(0, 5, capi.TemplateSlicesAnnotation, gpuSlices), nil, ""),
	})
	stop := make(chan struct{})
	defer close(stop)
	p, err := New(Options{Dynamic: f.dyn, Kube: f.kube, WatchUntil: stop,
		Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lists := func() int {
		n := 0
		for _, a := range f.dyn.Actions() {
			if a.GetVerb() == "list" {
				n++
			}
		}
		return n
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if lists() == 0 {
		t.Fatalf("the first Refresh listed nothing")
	}
	if err := p.Refresh(ctx); err != nil { // the watches have synced
		t.Fatal(err)
	}
	groups := p.NodeGroups()
	if len(groups) != 1 {
		t.Fatalf("groups %v, want the MachineDeployment", ids(groups))
	}
	if err := groups[0].IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var size int
	for range 100 { // the watch delivers the scale-up
		f.dyn.ClearActions()
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if n := lists(); n != 0 {
			t.Fatalf("a later Refresh sent %d LISTs, want none: %v", n, f.dyn.Actions())
		}
		if size, err = p.NodeGroups()[0].TargetSize(); err != nil {
			t.Fatal(err)
		}
		if size == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if size != 3 {
		t.Errorf("target size %d after the scale-up, want 3 seen through the watch", size)
	}
}

// With WatchUntil, infrastructure templates come from a watch, as CA reads
// them from informers: once it has synced a Refresh GETs no template, and
// a template's new status.capacity is seen through it.
func TestInfraTemplatesFromWatch(t *testing.T) {
	f, p, stop := infraTemplateFixture(t)
	defer close(stop)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := templateCalls(f, "get"); n == 0 {
		t.Fatalf("the first Refresh did not GET the template (watch not synced yet): %v", f.dyn.Actions())
	}
	if cpu := templateCPU(t, p); cpu != 32 {
		t.Fatalf("template node cpu %d, want the template's 32", cpu)
	}
	tmpl, err := f.dyn.Resource(fooTemplates).Namespace("ns").Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(tmpl.Object, "64", "status", "capacity", "cpu")
	if _, err := f.dyn.Resource(fooTemplates).Namespace("ns").Update(ctx, tmpl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cpu := int64(0)
	for range 200 {
		f.dyn.ClearActions()
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		gets := templateCalls(f, "get")
		if cpu = templateCPU(t, p); cpu == 64 && gets == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("template node cpu %d with %d template GETs in the last Refresh; want 64 seen through the watch, no GET", cpu, templateCalls(f, "get"))
}

// A role that may get templates but not list and watch them (draxr's
// chart before, CA's minimal scale-from-zero role): the watch is stopped
// after its first refusal and every Refresh reads the template by GET.
func TestInfraTemplatesWatchRefused(t *testing.T) {
	f, p, stop := infraTemplateFixture(t)
	defer close(stop)
	f.dyn.PrependReactor("list", "foomachinetemplates", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New("no list"))
	})
	ctx := context.Background()
	for range 20 {
		f.dyn.ClearActions()
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if n := templateCalls(f, "get"); n != 1 {
			t.Fatalf("a Refresh sent %d template GETs, want 1: %v", n, f.dyn.Actions())
		}
		if cpu := templateCPU(t, p); cpu != 32 {
			t.Fatalf("template node cpu %d, want the template's 32", cpu)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.watched.mu.Lock()
	tw := p.watched.templates[templateKey{fooTemplates, "ns"}]
	p.watched.mu.Unlock()
	if tw == nil || tw.informer != nil || tw.failedUntil.IsZero() {
		t.Errorf("template watch %+v, want it stopped after the refusal", tw)
	}
}

var fooTemplates = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Resource: "foomachinetemplates"}

// infraTemplateFixture is a MachineDeployment at zero whose only
// description is its FooMachineTemplate's status.capacity (32 cpu), and a
// provider with watches.
func infraTemplateFixture(t *testing.T) (*fakeCluster, *Provider, chan struct{}) {
	md, tmpl := withInfraRef("ns", "gpu", 0, "big"), fooTemplate("ns", "big")
	f := newFake(t, []runtime.Object{md, tmpl})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{fooTemplates.GroupVersion()})
	mapper.Add(fooTemplates.GroupVersion().WithKind("FooMachineTemplate"), meta.RESTScopeNamespace)
	stop := make(chan struct{})
	p, err := New(Options{Dynamic: f.dyn, Kube: f.kube, Mapper: mapper, WatchUntil: stop, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	return f, p, stop
}

func templateCalls(f *fakeCluster, verb string) int {
	n := 0
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "foomachinetemplates" {
			n++
		}
	}
	return n
}

func templateCPU(t *testing.T, p *Provider) int64 {
	t.Helper()
	groups := p.NodeGroups()
	if len(groups) != 1 {
		t.Fatalf("groups %v, want the MachineDeployment", ids(groups))
	}
	node, _, err := groups[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	return node.Status.Capacity.Cpu().Value()
}
