package kwok

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider/providertest"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

const ns = "kube-system"

func configMap(name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

const configmapConfig = `apiVersion: v1alpha1
readNodesFrom: configmap
nodegroups:
  fromNodeLabelKey: "node.kubernetes.io/instance-type"
nodes:
  skipTaint: true
configmap:
  name: kwok-provider-templates
`

// userTemplate is a template as a user writes it in the templates
// ConfigMap: the group label, sizes and slices as annotations.
func userTemplate(t *testing.T, name, instanceType string, annotations map[string]string, devices int) *v1.Node {
	t.Helper()
	n := fx.Node(name, 32, 128, nil)
	n.APIVersion, n.Kind = "v1", "Node"
	n.UID = ""
	n.Labels = map[string]string{"node.kubernetes.io/instance-type": instanceType, v1.LabelHostname: name}
	n.Annotations = annotations
	if devices > 0 {
		spec := fx.GPUSlice("x", devices).Spec
		spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
		b, err := yaml.Marshal([]resourceapi.ResourceSliceSpec{spec})
		if err != nil {
			t.Fatal(err)
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[capi.TemplateSlicesAnnotation] = string(b)
	}
	return n
}

func templatesData(t *testing.T, nodes ...*v1.Node) string {
	t.Helper()
	var docs []string
	for _, n := range nodes {
		b, err := yaml.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

type env struct {
	client *fake.Clientset
	p      *Provider
	stop   func()
}

// start builds the provider over a fake API server holding objs, with a
// running node and slice informer as the autoscaler has.
func start(t *testing.T, objs ...runtime.Object) (*env, error) {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	nodes, slices := f.Core().V1().Nodes(), f.Resource().V1().ResourceSlices()
	nodes.Informer()
	slices.Informer()
	stopCh := make(chan struct{})
	f.Start(stopCh)
	f.WaitForCacheSync(stopCh)
	stop := func() { close(stopCh); f.Shutdown() }
	p, err := New(context.Background(), Options{Client: client, Namespace: ns, Nodes: nodes.Lister(), Slices: slices.Lister()})
	if err != nil {
		stop()
		return nil, err
	}
	t.Cleanup(stop)
	return &env{client: client, p: p, stop: stop}, nil
}

// settle waits until the informer shows what the fake server holds, then
// refreshes.
func (e *env) settle(ctx context.Context) error {
	want, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := e.p.opts.Nodes.List(labels.Everything())
		if len(got) == len(want.Items) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return e.p.Refresh(ctx)
}

func gpuMember(name string) *v1.Node {
	n := fx.Node(name, 32, 128, nil)
	n.Labels["node.kubernetes.io/instance-type"] = "gpu"
	n.Annotations = map[string]string{FakeNodeAnnotation: FakeNodeValue, GroupNameAnnotation: "gpu"}
	n.Spec.ProviderID = ProviderIDPrefix + name
	return n
}

// The provider contract, over templates read from the ConfigMaps as a
// user writes them.
func TestProviderContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Env {
		gpu := userTemplate(t, "gpu-template", "gpu", map[string]string{MinSizeAnnotation: "1", MaxSizeAnnotation: "3",
			nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime: "5m"}, 8)
		plain := userTemplate(t, "plain-template", "plain", map[string]string{MaxSizeAnnotation: "2"}, 0)
		e, err := start(t, configMap(DefaultConfigName, map[string]string{ConfigKey: configmapConfig}),
			configMap(DefaultTemplatesName, map[string]string{TemplatesKey: templatesData(t, gpu, plain)}),
			gpuMember("gpu-abcde"))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		m, err := e.client.CoreV1().Nodes().Get(context.Background(), "gpu-abcde", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &providertest.Env{Provider: e.p, Group: "gpu", Plain: "plain", Member: m, Settle: e.settle}
	})
}

// A new node is a kwok fake node of its group, NotReady until the kwok
// controller takes it up, with the group's slices owned by it; deleting
// it removes its slices and the pods bound to it.
func TestNodesAreKwokNodesWithSlices(t *testing.T) {
	ctx := context.Background()
	gpu := userTemplate(t, "gpu-template", "gpu", map[string]string{MaxSizeAnnotation: "5"}, 4)
	e, err := start(t, configMap(DefaultConfigName, map[string]string{ConfigKey: strings.Replace(configmapConfig, "skipTaint: true", "skipTaint: false", 1)}),
		configMap(DefaultTemplatesName, map[string]string{TemplatesKey: templatesData(t, gpu)}))
	if err != nil {
		t.Fatal(err)
	}
	g := e.p.NodeGroups()[0]
	if g.Id() != "gpu" || g.MinSize() != 0 || g.MaxSize() != 5 {
		t.Fatalf("group %s min %d max %d, want gpu 0 5", g.Id(), g.MinSize(), g.MaxSize())
	}
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n, _ := g.TargetSize(); n != 2 {
		t.Errorf("target right after IncreaseSize(2) = %d, want 2 (before the informer shows the nodes)", n)
	}
	nodes, _ := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 2 {
		t.Fatalf("%d nodes, want 2", len(nodes.Items))
	}
	n := nodes.Items[0]
	if !strings.HasPrefix(n.Name, "gpu-") || len(n.Name) != len("gpu-")+5 {
		t.Errorf("node name %q, want gpu-<5 characters>", n.Name)
	}
	if n.Annotations[FakeNodeAnnotation] != "fake" || n.Annotations[GroupNameAnnotation] != "gpu" ||
		n.Spec.ProviderID != "kwok:"+n.Name || n.Labels[v1.LabelHostname] != n.Name {
		t.Errorf("node annotations %v providerID %q hostname %q", n.Annotations, n.Spec.ProviderID, n.Labels[v1.LabelHostname])
	}
	if len(n.Status.Conditions) != 0 {
		t.Errorf("conditions %v: a new node waits for kwok's node-initialize stage", n.Status.Conditions)
	}
	if cpu := n.Status.Allocatable[v1.ResourceCPU]; cpu.Value() != 32 {
		t.Errorf("allocatable cpu %v, want the template's 32", cpu.String())
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != TaintKey || n.Spec.Taints[0].Effect != v1.TaintEffectNoSchedule {
		t.Errorf("taints %v, want kwok-provider=true:NoSchedule without skipTaint", n.Spec.Taints)
	}
	slices, _ := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if len(slices.Items) != 2 {
		t.Fatalf("%d slices, want one per node", len(slices.Items))
	}
	for _, s := range slices.Items {
		if len(s.Spec.Devices) != 4 || s.Spec.Pool.Name != *s.Spec.NodeName || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" {
			t.Errorf("slice %s: %d devices pool %s owners %v", s.Name, len(s.Spec.Devices), s.Spec.Pool.Name, s.OwnerReferences)
		}
	}
	pod := fx.Pod("p", 100, nil)
	pod.Namespace, pod.Spec.NodeName = "default", n.Name
	if _, err := e.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.DeleteNodes(ctx, []*v1.Node{&n}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
		t.Error("deleted node still exists")
	}
	pods, _ := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("pod bound to the deleted node still exists")
	}
	if got, _ := g.TargetSize(); got != 1 {
		t.Errorf("target after deleting 1 of 2 = %d, want 1 (before the informer shows it)", got)
	}
	if err := e.settle(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.TargetSize(); got != 1 {
		t.Errorf("target after settling = %d, want 1", got)
	}
}

// After a restart between creating a node and its slices, Refresh
// publishes the missing slices.
func TestRefreshPublishesMissingSlices(t *testing.T) {
	ctx := context.Background()
	gpu := userTemplate(t, "gpu-template", "gpu", nil, 2)
	orphan := gpuMember("gpu-xyzab")
	e, err := start(t, configMap(DefaultConfigName, map[string]string{ConfigKey: configmapConfig}),
		configMap(DefaultTemplatesName, map[string]string{TemplatesKey: templatesData(t, gpu)}), orphan)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.settle(ctx); err != nil {
		t.Fatal(err)
	}
	slices, _ := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if len(slices.Items) != 1 || *slices.Items[0].Spec.NodeName != orphan.Name {
		t.Fatalf("slices %v, want the member's one", slices.Items)
	}
}

// readNodesFrom: cluster groups the cluster's nodes by the annotation;
// a live template node's published slices are the group's template.
func TestReadNodesFromCluster(t *testing.T) {
	live := fx.Node("real-1", 16, 64, nil)
	live.Annotations = map[string]string{"eks.amazonaws.com/nodegroup": "a100", MaxSizeAnnotation: "10"}
	slice := fx.GPUSlice("real-1", 8)
	other := fx.Node("real-2", 16, 64, nil) // no group annotation: not a template
	cfg := "readNodesFrom: cluster\nnodegroups:\n  fromNodeAnnotationKey: eks.amazonaws.com/nodegroup\n"
	e, err := start(t, configMap(DefaultConfigName, map[string]string{ConfigKey: cfg}), live, slice, other)
	if err != nil {
		t.Fatal(err)
	}
	groups := e.p.NodeGroups()
	if len(groups) != 1 || groups[0].Id() != "a100" || groups[0].MaxSize() != 10 {
		t.Fatalf("groups %v, want a100 with max 10", groups)
	}
	node, slices, err := groups[0].TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if len(slices) != 1 || len(slices[0].Spec.Devices) != 8 {
		t.Errorf("template slices %v, want the live node's 8 devices", slices)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != TaintKey {
		t.Errorf("template taints %v, want kwok-provider by default", node.Spec.Taints)
	}
	if node.Annotations[FakeNodeAnnotation] != FakeNodeValue {
		t.Errorf("template annotations %v lack the fake-node mark", node.Annotations)
	}
}

// Bad configurations and templates name the object, key and field.
func TestBadInput(t *testing.T) {
	tmpl := func(ann map[string]string) string {
		return templatesData(t, userTemplate(t, "t1", "gpu", ann, 0))
	}
	for _, tc := range []struct {
		name      string
		config    map[string]string
		templates map[string]string
		want      string
	}{
		{"no config ConfigMap", nil, nil, "ConfigMap kube-system/kwok-provider-config"},
		{"no config key", map[string]string{"other": ""}, nil, `ConfigMap kube-system/kwok-provider-config has no key "config"`},
		{"readNodesFrom", map[string]string{ConfigKey: "readNodesFrom: disk\nnodegroups: {fromNodeLabelKey: x}"}, nil, `readNodesFrom: want "configmap" or "cluster", got "disk"`},
		{"unknown field", map[string]string{ConfigKey: "readNodesFrom: cluster\nnodegroup: {}"}, nil, `unknown field "nodegroup"`},
		{"no nodegroups", map[string]string{ConfigKey: "readNodesFrom: cluster"}, nil, "nodegroups is required"},
		{"both keys", map[string]string{ConfigKey: "readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: a, fromNodeAnnotationKey: b}"}, nil, "not both"},
		{"configmap without name", map[string]string{ConfigKey: "readNodesFrom: configmap\nnodegroups: {fromNodeLabelKey: a}"}, nil, "needs configmap.name"},
		{"half a gpuConfig", map[string]string{ConfigKey: "readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: a}\nnodes: {gpuConfig: {gpuLabelKey: x}}"}, nil, "nodes.gpuConfig"},
		{"missing templates", map[string]string{ConfigKey: configmapConfig}, nil, "templates ConfigMap kube-system/kwok-provider-templates"},
		{"templates not nodes", map[string]string{ConfigKey: configmapConfig}, map[string]string{TemplatesKey: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"}, "want a Node"},
		{"bad max-count", map[string]string{ConfigKey: configmapConfig}, map[string]string{TemplatesKey: tmpl(map[string]string{MaxSizeAnnotation: "many"})},
			`template node t1 (node group gpu): annotation cluster-autoscaler.kwok.nodegroup/max-count: "many"`},
		{"max below min", map[string]string{ConfigKey: configmapConfig}, map[string]string{TemplatesKey: tmpl(map[string]string{MinSizeAnnotation: "3", MaxSizeAnnotation: "2"})}, "below min-count 3"},
		{"bad slices", map[string]string{ConfigKey: configmapConfig}, map[string]string{TemplatesKey: tmpl(map[string]string{capi.TemplateSlicesAnnotation: "- devices: []"})},
			"annotation draxr.dev/template-resource-slices"},
		{"bad option", map[string]string{ConfigKey: configmapConfig}, map[string]string{TemplatesKey: tmpl(map[string]string{nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime: "soon"})},
			"template node t1 (node group gpu): annotation cluster.x-k8s.io/autoscaling-options-scaledownunneededtime"},
		{"no group", map[string]string{ConfigKey: strings.Replace(configmapConfig, "node.kubernetes.io/instance-type", "pool", 1)}, map[string]string{TemplatesKey: tmpl(nil)},
			"no template node has the label pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.config != nil {
				objs = append(objs, configMap(DefaultConfigName, tc.config))
			}
			if tc.templates != nil {
				objs = append(objs, configMap(DefaultTemplatesName, tc.templates))
			}
			_, err := start(t, objs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
