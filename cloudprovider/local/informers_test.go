package local

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/cloudprovider/providertest"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// withInformers is a provider over client reading the autoscaler's node
// and slice informers, started and synced.
func withInformers(t *testing.T, client *fake.Clientset, opts Options) *Provider {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	opts.Client = client
	opts.Nodes, opts.Slices = factory.Core().V1().Nodes().Lister(), factory.Resource().V1().ResourceSlices().Lister()
	providertest.StartInformers(t, factory)
	return mustNew(t, opts)
}

// settleInformers waits until the node informer shows the nodes the fake
// API server holds (names and versions), then refreshes.
func settleInformers(ctx context.Context, client *fake.Clientset, p *Provider) error {
	want, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	key := func(n *v1.Node) string { return n.Name + "@" + n.ResourceVersion }
	var wantKeys []string
	for i := range want.Items {
		wantKeys = append(wantKeys, key(&want.Items[i]))
	}
	slices.Sort(wantKeys)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		got, err := p.opts.Nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		var gotKeys []string
		for _, n := range got {
			gotKeys = append(gotKeys, key(n))
		}
		slices.Sort(gotKeys)
		if slices.Equal(gotKeys, wantKeys) {
			break
		}
	}
	return p.Refresh(ctx)
}

// A steady loop's provider calls read the informers: the API server gets
// no LIST of nodes or slices, however many loops run, and the answers are
// those of the provider that lists.
func TestSteadyLoopSendsNoList(t *testing.T) {
	ctx := context.Background()
	long := metav1.NewTime(time.Now().Add(-time.Hour))
	ready := func(n *v1.Node) *v1.Node {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastTransitionTime: long}}
		n.CreationTimestamp = long
		return n
	}
	copied := gpuGroup(0, 3)
	copied.Name, copied.Spec.ResourceSlices = "copied", nil
	objs := []*v1.Node{ready(member("gpu", "gpu-0")), ready(member("gpu", "gpu-1")), ready(member("copied", "copied-0")),
		fx.Node("unmanaged", 8, 32, nil)}
	newClient := func() *fake.Clientset {
		c := fake.NewClientset(fx.GPUSlice("copied-0", 4), fx.GPUSlice("gpu-0", 8))
		for _, n := range objs {
			if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	groups := []*nodegroup.NodeGroup{gpuGroup(0, 3), copied}
	listing := mustNew(t, Options{Client: newClient(), Groups: groups})
	client := newClient()
	p := withInformers(t, client, Options{Groups: groups})
	client.ClearActions()

	type answer struct {
		group     string
		target    int
		instances []string
		slices    int
		members   []string
	}
	loop := func(p *Provider) []answer {
		t.Helper()
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		var out []answer
		for _, g := range p.NodeGroups() {
			a := answer{group: g.Id()}
			a.target, _ = g.TargetSize()
			in, _ := g.Nodes()
			for _, i := range in {
				a.instances = append(a.instances, i.ProviderID)
			}
			_, s, err := g.TemplateNodeInfo()
			if err != nil {
				t.Fatal(err)
			}
			for _, sl := range s {
				a.slices += len(sl.Spec.Devices)
			}
			for _, n := range objs {
				if ng, _ := p.NodeGroupForNode(n); ng != nil && ng.Id() == g.Id() {
					a.members = append(a.members, n.Name)
				}
			}
			out = append(out, a)
		}
		return out
	}
	want := loop(listing)
	if len(want) != 2 || want[0].group != "copied" || want[0].slices != 4 || want[1].target != 2 {
		t.Fatalf("the listing provider answers %+v, want copied with its member's 4 devices and gpu with 2 nodes", want)
	}
	for i := range 3 {
		got := loop(p)
		for j := range want {
			if j >= len(got) || got[j].group != want[j].group || got[j].target != want[j].target || got[j].slices != want[j].slices ||
				!slices.Equal(got[j].instances, want[j].instances) || !slices.Equal(got[j].members, want[j].members) {
				t.Fatalf("loop %d: reading the informers answers %+v, listing %+v", i, got, want)
			}
		}
	}
	if lists := providertest.ListCalls(client, ""); lists != 0 {
		t.Errorf("3 steady loops sent %d LISTs (nodes %d, slices %d), want none", lists,
			providertest.ListCalls(client, "nodes"), providertest.ListCalls(client, "resourceslices"))
	}
}

// A read-only provider reading listers needs no client: draxr simulate
// --scale-down over a dump has none.
func TestReadOnlyNeedsNoClient(t *testing.T) {
	if _, err := New(Options{Groups: []*nodegroup.NodeGroup{gpuGroup(0, 3)}}); err == nil {
		t.Error("New without a client or listers: no error")
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	p := mustNew(t, Options{Groups: []*nodegroup.NodeGroup{gpuGroup(0, 3)}, ReadOnly: true,
		Nodes: factory.Core().V1().Nodes().Lister(), Slices: factory.Resource().V1().ResourceSlices().Lister()})
	providertest.StartInformers(t, factory)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}
