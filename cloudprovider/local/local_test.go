package local

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	nodeutil "k8s.io/component-helpers/node/util"

	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

func gpuGroup(min, max int) *nodegroup.NodeGroup {
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{MinSize: min, MaxSize: max, Template: *fx.Node("t", 32, 128, nil)}}
	g.Spec.ResourceSlices = []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec, fx.DeviceSlice("x", "nic.example.com", 2, "nic").Spec}
	return g
}

// A new node is created at once (NotReady), turns Ready after the node
// delay, and publishes one pool per driver after the slices delay.
func TestNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{gpuGroup(0, 3)},
		NodeReadyDelay: 5 * time.Second, SlicesDelay: 3 * time.Second, Now: func() time.Time { return now }})
	g := p.NodeGroups()[0]
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	nodes, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 2 {
		t.Fatalf("nodes = %d, want 2", len(nodes.Items))
	}
	n := nodes.Items[0]
	if n.Name != "gpu-0" || n.Labels[nodegroup.GroupLabel] != "gpu" || n.Spec.ProviderID != "draxr-local:///gpu/gpu-0" {
		t.Errorf("node = %s labels %v providerID %q", n.Name, n.Labels, n.Spec.ProviderID)
	}
	if ng, _ := p.NodeGroupForNode(&n); ng == nil || ng.Id() != "gpu" {
		t.Errorf("NodeGroupForNode = %v", ng)
	}
	// The fake API server does not set creationTimestamp; treat creation as now.
	for i := range nodes.Items {
		nodes.Items[i].CreationTimestamp = metav1.NewTime(now)
		if _, err := client.CoreV1().Nodes().Update(ctx, &nodes.Items[i], metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		after      time.Duration
		wantReady  bool
		wantSlices int
	}{
		{after: 4 * time.Second},
		{after: 6 * time.Second, wantReady: true},
		{after: 8 * time.Second, wantReady: true},
		{after: 10 * time.Second, wantReady: true, wantSlices: 4},
	}
	start := now
	for _, s := range steps {
		now = start.Add(s.after)
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		node, _ := client.CoreV1().Nodes().Get(ctx, "gpu-0", metav1.GetOptions{})
		_, ready := nodeutil.GetNodeCondition(&node.Status, v1.NodeReady)
		if got := ready.Status == v1.ConditionTrue; got != s.wantReady {
			t.Errorf("after %s: Ready = %v, want %v", s.after, got, s.wantReady)
		}
		slices, _ := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if len(slices.Items) != s.wantSlices {
			t.Errorf("after %s: %d slices, want %d", s.after, len(slices.Items), s.wantSlices)
		}
	}
	slices, _ := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	for _, s := range slices.Items {
		if s.Spec.Pool.ResourceSliceCount != 1 || s.Spec.Pool.Name != *s.Spec.NodeName || len(s.OwnerReferences) != 1 {
			t.Errorf("slice %s: pool %+v owners %v; want one slice per driver pool named after the node, owned by it", s.Name, s.Spec.Pool, s.OwnerReferences)
		}
	}
}

func TestSizeLimits(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{gpuGroup(1, 2)}})
	g := p.NodeGroups()[0]
	if err := g.IncreaseSize(ctx, 3); err == nil || !strings.Contains(err.Error(), "exceeds max size 2") {
		t.Errorf("IncreaseSize(3) = %v, want the max size error", err)
	}
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if size, _ := g.TargetSize(); size != 1 {
		t.Errorf("target size = %d, want 1", size)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "gpu-0", metav1.GetOptions{})
	if err := g.DeleteNodes(ctx, []*v1.Node{node}); err == nil || !strings.Contains(err.Error(), "below min size 1") {
		t.Errorf("DeleteNodes below min = %v, want the min size error", err)
	}
}

// Without template slices in the config, a live node's slices are the
// template (node name and pool rewritten).
func TestTemplateFromLiveNode(t *testing.T) {
	ctx := context.Background()
	g := gpuGroup(0, 3)
	g.Spec.ResourceSlices = nil
	live := fx.Node("gpu-7", 32, 128, nil)
	live.Labels[nodegroup.GroupLabel] = "gpu"
	client := fake.NewClientset(live, fx.GPUSlice("gpu-7", 4))
	p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{g}})
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	node, slices, err := p.NodeGroups()[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if len(slices) != 1 || len(slices[0].Spec.Devices) != 4 || *slices[0].Spec.NodeName != node.Name || slices[0].Spec.Pool.Name != node.Name {
		t.Fatalf("template slices = %+v for node %s, want the live node's 4 devices under the template's name", slices, node.Name)
	}
}

func mustNew(t *testing.T, opts Options) *Provider {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A group annotated never-Ready registers nodes that stay NotReady; a bad
// annotation is an error naming the group and the field.
func TestNodeReadyDelayAnnotation(t *testing.T) {
	g := gpuGroup(0, 3)
	g.Annotations = map[string]string{NodeReadyDelayAnnotation: "soon"}
	if _, err := New(Options{Client: fake.NewClientset(), Groups: []*nodegroup.NodeGroup{g}}); err == nil ||
		!strings.Contains(err.Error(), "NodeGroup gpu: metadata.annotations[local.draxr.dev/node-ready-delay]") {
		t.Fatalf("New with a bad annotation = %v, want an error naming the group and field", err)
	}
	g.Annotations[NodeReadyDelayAnnotation] = "never"
	client := fake.NewClientset()
	now := time.Now()
	p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{g}, Now: func() time.Time { return now }})
	ctx := context.Background()
	if err := p.NodeGroups()[0].IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "gpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, c := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady); c == nil || c.Status == v1.ConditionTrue {
		t.Fatalf("node of a never-Ready group: Ready condition %+v, want NotReady after an hour", c)
	}
}

// A large scale-up creates its nodes concurrently; a node the API server
// refuses is named in the error and the others are still created.
func TestIncreaseSizeInBulk(t *testing.T) {
	tests := []struct {
		name        string
		delta       int
		refuse      string
		wantNodes   int
		wantErrText string
	}{
		{name: "all created", delta: 75, wantNodes: 75},
		{name: "one refused", delta: 75, refuse: "gpu-42", wantNodes: 74,
			wantErrText: "node group gpu: create node gpu-42: quota exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset()
			client.PrependReactor("create", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
				node := action.(k8stesting.CreateAction).GetObject().(*v1.Node)
				if node.Name == tc.refuse {
					return true, nil, errors.New("quota exceeded")
				}
				return false, nil, nil
			})
			p := mustNew(t, Options{Client: client, Groups: []*nodegroup.NodeGroup{gpuGroup(0, 100)}})
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			err := p.NodeGroups()[0].IncreaseSize(ctx, tc.delta)
			switch {
			case tc.wantErrText == "" && err != nil:
				t.Fatalf("IncreaseSize(%d) = %v, want no error", tc.delta, err)
			case tc.wantErrText != "" && (err == nil || err.Error() != tc.wantErrText):
				t.Fatalf("IncreaseSize(%d) = %v, want %q", tc.delta, err, tc.wantErrText)
			}
			nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != tc.wantNodes {
				t.Fatalf("nodes created = %d, want %d", len(nodes.Items), tc.wantNodes)
			}
			for _, n := range nodes.Items {
				if n.Name == tc.refuse {
					t.Errorf("refused node %s exists", n.Name)
				}
				if len(n.Status.Conditions) == 0 || n.Status.Conditions[0].Reason != "Provisioning" {
					t.Errorf("node %s conditions = %v, want NotReady Provisioning", n.Name, n.Status.Conditions)
				}
			}
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if size, _ := p.NodeGroups()[0].TargetSize(); size != tc.wantNodes {
				t.Errorf("target size after refresh = %d, want %d (the nodes created)", size, tc.wantNodes)
			}
		})
	}
}

// The local provider reads the Cluster API autoscaling-options-*
// annotations on its NodeGroups too; a bad one names the group and field.
func TestGetOptions(t *testing.T) {
	g := gpuGroup(0, 3)
	g.Annotations = map[string]string{nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnreadyTime: "soon"}
	if _, err := New(Options{Client: fake.NewClientset(), Groups: []*nodegroup.NodeGroup{g}}); err == nil ||
		!strings.Contains(err.Error(), "NodeGroup gpu: metadata.annotations[cluster.x-k8s.io/autoscaling-options-scaledownunreadytime]") {
		t.Fatalf("New with a bad annotation = %v, want an error naming the group and field", err)
	}
	g.Annotations[nodegroup.AutoscalingOptionsPrefix+nodegroup.OptScaleDownUnreadyTime] = "90s"
	p := mustNew(t, Options{Client: fake.NewClientset(), Groups: []*nodegroup.NodeGroup{g}})
	defaults := cloudprovider.NodeGroupOptions{ScaleDownUnneededTime: 10 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute}
	o, err := cloudprovider.OptionsOf(p.NodeGroups()[0], defaults)
	if err != nil {
		t.Fatal(err)
	}
	if o.ScaleDownUnreadyTime != 90*time.Second || o.ScaleDownUnneededTime != 10*time.Minute {
		t.Errorf("options %+v, want unready time 90s from the annotation and the flag's unneeded time", o)
	}
}
