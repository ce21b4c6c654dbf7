package local

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// member is a live node of group g.
func member(g, name string) *v1.Node {
	n := fx.Node(name, 32, 128, nil)
	n.Labels[nodegroup.GroupLabel] = g
	n.Spec.ProviderID = ProviderIDPrefix + g + "/" + name
	return n
}

func TestIncreaseSize(t *testing.T) {
	tests := []struct {
		name      string
		existing  []runtime.Object
		max       int
		delta     int
		createErr error
		wantErr   string
		wantNodes []string
	}{
		{name: "from zero", max: 3, delta: 2, wantNodes: []string{"gpu-0", "gpu-1"}},
		{name: "up to max exactly", existing: []runtime.Object{member("gpu", "gpu-0")}, max: 3, delta: 2,
			wantNodes: []string{"gpu-0", "gpu-1", "gpu-2"}},
		{name: "names continue after the highest index", existing: []runtime.Object{member("gpu", "gpu-4")}, max: 5, delta: 1,
			wantNodes: []string{"gpu-4", "gpu-5"}},
		{name: "over max", existing: []runtime.Object{member("gpu", "gpu-0")}, max: 2, delta: 2,
			wantErr: "node group gpu: 1 + 2 nodes exceeds max size 2", wantNodes: []string{"gpu-0"}},
		{name: "zero delta", max: 3, delta: 0, wantErr: "size increase must be positive, got 0"},
		{name: "negative delta", max: 3, delta: -1, wantErr: "size increase must be positive, got -1"},
		{name: "API error names the node", max: 3, delta: 1, createErr: errors.New("etcd down"),
			wantErr: "node group gpu: create node gpu-0: etcd down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(tt.existing...)
			if tt.createErr != nil {
				client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.createErr
				})
			}
			p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{gpuGroup(0, tt.max)}})
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			err := p.NodeGroups()[0].IncreaseSize(ctx, tt.delta)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("IncreaseSize(%d) = %v, want error %q", tt.delta, err, tt.wantErr)
			}
			list, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			var got []string
			for _, n := range list.Items {
				got = append(got, n.Name)
				if n.Labels[nodegroup.GroupLabel] != "gpu" || n.Spec.ProviderID != ProviderIDPrefix+"gpu/"+n.Name {
					t.Errorf("node %s: label %q providerID %q", n.Name, n.Labels[nodegroup.GroupLabel], n.Spec.ProviderID)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantNodes) {
				t.Errorf("nodes = %v, want %v", got, tt.wantNodes)
			}
		})
	}
}

func TestDeleteNodes(t *testing.T) {
	running := fx.Pod("running", 100, nil)
	running.Spec.NodeName = "gpu-1"
	elsewhere := fx.Pod("elsewhere", 100, nil)
	elsewhere.Spec.NodeName = "gpu-0"
	tests := []struct {
		name      string
		min       int
		delete    []string
		foreign   bool // delete a node of another group
		wantErr   string
		wantNodes []string
		wantPods  []string
	}{
		{name: "one node: its slices and pods go with it", min: 0, delete: []string{"gpu-1"},
			wantNodes: []string{"cpu-0", "gpu-0"}, wantPods: []string{"elsewhere"}},
		{name: "down to min exactly", min: 1, delete: []string{"gpu-1"},
			wantNodes: []string{"cpu-0", "gpu-0"}, wantPods: []string{"elsewhere"}},
		{name: "below min is refused, nothing deleted", min: 1, delete: []string{"gpu-0", "gpu-1"},
			wantErr: "node group gpu: deleting 2 of 2 nodes goes below min size 1", wantNodes: []string{"cpu-0", "gpu-0", "gpu-1"},
			wantPods: []string{"elsewhere", "running"}},
		{name: "node of another group is refused", min: 0, foreign: true,
			wantErr: `node group gpu: node cpu-0 belongs to "cpu"`, wantNodes: []string{"cpu-0", "gpu-0", "gpu-1"},
			wantPods: []string{"elsewhere", "running"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(member("gpu", "gpu-0"), member("gpu", "gpu-1"), member("cpu", "cpu-0"),
				fx.GPUSlice("gpu-0", 8), fx.GPUSlice("gpu-1", 8), running, elsewhere)
			honourNodeNameSelector(client)
			cpu := gpuGroup(0, 3)
			cpu.Name, cpu.Spec.ResourceSlices = "cpu", nil
			p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{gpuGroup(tt.min, 3), cpu}})
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			var g = p.NodeGroups()[1]
			if g.Id() != "gpu" {
				t.Fatalf("groups sorted wrongly: %s", g.Id())
			}
			var nodes []*v1.Node
			names := tt.delete
			if tt.foreign {
				names = []string{"cpu-0"}
			}
			for _, n := range names {
				node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, node)
			}
			err := g.DeleteNodes(ctx, nodes)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("DeleteNodes = %v, want error %q", err, tt.wantErr)
			}
			nl, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			pl, _ := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			sl, _ := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			var gotNodes, gotPods []string
			for _, n := range nl.Items {
				gotNodes = append(gotNodes, n.Name)
			}
			for _, p := range pl.Items {
				gotPods = append(gotPods, p.Name)
			}
			slices.Sort(gotNodes)
			slices.Sort(gotPods)
			if !slices.Equal(gotNodes, tt.wantNodes) || !slices.Equal(gotPods, tt.wantPods) {
				t.Errorf("left nodes %v pods %v, want %v %v", gotNodes, gotPods, tt.wantNodes, tt.wantPods)
			}
			for _, s := range sl.Items {
				if !slices.Contains(tt.wantNodes, *s.Spec.NodeName) {
					t.Errorf("slice %s of deleted node %s is left", s.Name, *s.Spec.NodeName)
				}
			}
			if len(sl.Items) == 0 {
				t.Error("every slice was deleted, want those of the kept nodes left")
			}
		})
	}
}

// honourNodeNameSelector makes the fake API server apply the field
// selectors the provider uses (spec.nodeName), which it otherwise ignores.
func honourNodeNameSelector(client *fake.Clientset) {
	client.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		node, ok := a.(clienttesting.ListAction).GetListRestrictions().Fields.RequiresExactMatch("spec.nodeName")
		if !ok {
			return false, nil, nil
		}
		obj, err := client.Tracker().List(a.GetResource(), a.GetResource().GroupVersion().WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*v1.PodList)
		kept := list.Items[:0]
		for _, p := range list.Items {
			if p.Spec.NodeName == node {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		return true, list, nil
	})
	client.PrependReactor("delete-collection", "resourceslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		node, ok := a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Fields.RequiresExactMatch(resourceapi.ResourceSliceSelectorNodeName)
		if !ok {
			return false, nil, nil
		}
		// Reactors run under the fake's lock: use the tracker, not the client.
		obj, err := client.Tracker().List(a.GetResource(), a.GetResource().GroupVersion().WithKind("ResourceSlice"), "")
		if err != nil {
			return true, nil, err
		}
		for _, s := range obj.(*resourceapi.ResourceSliceList).Items {
			if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
				if err := client.Tracker().Delete(a.GetResource(), "", s.Name); err != nil {
					return true, nil, err
				}
			}
		}
		return true, nil, nil
	})
}

func TestTemplateNodeInfoFromConfig(t *testing.T) {
	p := mustNew(t, Options{Client: fake.NewClientset(), Groups: []*nodegroup.NodeGroup{gpuGroup(0, 3)}})
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	node, sl, err := p.NodeGroups()[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[nodegroup.GroupLabel] != "gpu" || node.Name != "template-gpu" {
		t.Errorf("template node %s labels %v", node.Name, node.Labels)
	}
	got := map[string]int{}
	for _, s := range sl {
		got[s.Spec.Driver] += len(s.Spec.Devices)
		if *s.Spec.NodeName != node.Name || s.Spec.Pool.Name != node.Name || s.Spec.Pool.ResourceSliceCount != 1 {
			t.Errorf("slice %s: node %s pool %+v, want one pool per driver named after %s", s.Name, *s.Spec.NodeName, s.Spec.Pool, node.Name)
		}
	}
	if got[fx.Driver] != 8 || got["nic.example.com"] != 2 {
		t.Errorf("template devices per driver = %v, want 8 GPUs and 2 NICs", got)
	}
}

// fakeLauncher records what the provider asks of it.
type fakeLauncher struct {
	started  map[string][]string // group -> nodes
	ids      []string
	stopped  []string
	startErr error
}

func (l *fakeLauncher) Start(_ context.Context, g *nodegroup.NodeGroup, name, providerID string) error {
	if l.startErr != nil {
		return l.startErr
	}
	if l.started == nil {
		l.started = map[string][]string{}
	}
	l.started[g.Name] = append(l.started[g.Name], name)
	l.ids = append(l.ids, providerID)
	return nil
}
func (l *fakeLauncher) Launched(group string) []string { return l.started[group] }

// Stop stops the machine: it is no longer launched, as with the real
// launcher.
func (l *fakeLauncher) Stop(_ context.Context, node string) error {
	l.stopped = append(l.stopped, node)
	for g, names := range l.started {
		l.started[g] = slices.DeleteFunc(names, func(n string) bool { return n == node })
	}
	return nil
}

// With a Launcher, machines are started instead of Node objects created;
// started machines count toward the size before they register.
func TestLauncher(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	l := &fakeLauncher{}
	p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{gpuGroup(0, 3)}, Launcher: l})
	g := p.NodeGroups()[0]
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if nodes, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); len(nodes.Items) != 0 {
		t.Errorf("provider created %d Node objects; the launched machines register themselves", len(nodes.Items))
	}
	if want := []string{"gpu-0", "gpu-1"}; !slices.Equal(l.started["gpu"], want) {
		t.Errorf("started %v, want %v", l.started["gpu"], want)
	}
	if want := []string{ProviderIDPrefix + "gpu/gpu-0", ProviderIDPrefix + "gpu/gpu-1"}; !slices.Equal(l.ids, want) {
		t.Errorf("provider IDs %v, want %v", l.ids, want)
	}
	if size, _ := g.TargetSize(); size != 2 {
		t.Errorf("target size = %d, want 2 (started, not registered)", size)
	}
	if err := g.IncreaseSize(ctx, 2); err == nil || !strings.Contains(err.Error(), "2 + 2 nodes exceeds max size 3") {
		t.Errorf("IncreaseSize over max with launched machines = %v", err)
	}

	// gpu-0 registers, NotReady-tainted, then reports Ready.
	n := member("gpu", "gpu-0")
	n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule}, {Key: "keep", Effect: v1.TaintEffectNoSchedule}}
	if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Nodes().Get(ctx, "gpu-0", metav1.GetOptions{})
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "keep" {
		t.Errorf("taints = %v, want only the not-ready taint lifted", got.Spec.Taints)
	}
	if size, _ := g.TargetSize(); size != 2 {
		t.Errorf("target size = %d after registration, want 2 (not counted twice)", size)
	}
	if err := g.DeleteNodes(ctx, []*v1.Node{got}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.stopped, []string{"gpu-0"}) {
		t.Errorf("stopped %v, want [gpu-0]", l.stopped)
	}

	l.startErr = errors.New("no capacity")
	if err := g.IncreaseSize(ctx, 1); err == nil || !strings.Contains(err.Error(), "start node gpu-2: no capacity") {
		t.Errorf("IncreaseSize with a failing launcher = %v, want the node and cause named", err)
	}
}
