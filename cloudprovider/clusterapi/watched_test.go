package clusterapi

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

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
