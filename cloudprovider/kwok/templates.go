package kwok

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"

	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Annotations CA's kwok provider reads on template nodes (sizes) and
// writes on the nodes it makes (group name, kwok's fake-node mark).
const (
	GroupNameAnnotation   = "cluster-autoscaler.kwok.nodegroup/name"
	MinSizeAnnotation     = "cluster-autoscaler.kwok.nodegroup/min-count"
	MaxSizeAnnotation     = "cluster-autoscaler.kwok.nodegroup/max-count"
	DesiredSizeAnnotation = "cluster-autoscaler.kwok.nodegroup/desired-count"
	// FakeNodeAnnotation with value FakeNodeValue is the mark the kwok
	// controller manages a node by (its default
	// --manage-nodes-with-annotation-selector).
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	FakeNodeValue      = "fake"
	// TaintKey is the NoSchedule taint (value "true") new nodes carry
	// unless nodes.skipTaint is set.
	TaintKey = "kwok-provider"
	// DefaultMaxSize is a group's max-count when the template sets none.
	DefaultMaxSize = 200
)

// readTemplates returns the template nodes the config points at.
func readTemplates(ctx context.Context, c kubernetes.Interface, namespace string, cfg *Config) ([]*v1.Node, error) {
	if cfg.ReadNodesFrom == ReadNodesFromCluster {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("readNodesFrom: cluster: list nodes: %w", err)
		}
		out := make([]*v1.Node, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
	name := cfg.ConfigMap.Name
	cm, err := c.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("templates ConfigMap %s/%s: %w", namespace, name, err)
	}
	data, ok := cm.Data[TemplatesKey]
	if !ok || strings.TrimSpace(data) == "" {
		return nil, fmt.Errorf("templates ConfigMap %s/%s: no key %q (the template nodes)", namespace, name, TemplatesKey)
	}
	nodes, err := parseTemplates(data)
	if err != nil {
		return nil, fmt.Errorf("templates ConfigMap %s/%s key %s: %w", namespace, name, TemplatesKey, err)
	}
	return nodes, nil
}

// parseTemplates reads Node documents, or one v1 List of Nodes; anything
// that is not a Node is an error naming the document.
func parseTemplates(data string) ([]*v1.Node, error) {
	scheme := runtime.NewScheme()
	if err := clientscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	var out []*v1.Node
	for doc := 0; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if strings.TrimSpace(string(raw)) == "" {
			continue
		}
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		switch o := obj.(type) {
		case *v1.Node:
			out = append(out, o)
		case *v1.List:
			for i, item := range o.Items {
				obj, _, err := decoder.Decode(item.Raw, nil, nil)
				if err != nil {
					return nil, fmt.Errorf("document %d, items[%d]: %w", doc, i, err)
				}
				n, ok := obj.(*v1.Node)
				if !ok {
					return nil, fmt.Errorf("document %d, items[%d]: a %T, want a Node", doc, i, obj)
				}
				out = append(out, n)
			}
		default:
			return nil, fmt.Errorf("document %d: a %T, want a Node or a List of Nodes", doc, obj)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no template nodes")
	}
	return out, nil
}

// groupName is the group a node belongs to: the name annotation of nodes
// the provider made, else the configured label or annotation.
func groupName(n *v1.Node, by groupBy) string {
	if name := n.Annotations[GroupNameAnnotation]; name != "" {
		return name
	}
	if by.label {
		return n.Labels[by.key]
	}
	return n.Annotations[by.key]
}

// buildGroups makes one group per group name from the template nodes, the
// first node of each name being its template (as CA). slicesOf returns a
// live template node's slices (readNodesFrom: cluster), configMap the data
// of a ConfigMap the template-slices annotation references.
func buildGroups(templates []*v1.Node, cfg *Config, namespace string,
	slicesOf func(node string) ([]*resourceapi.ResourceSlice, error),
	configMap func(namespace, name string) (map[string]string, error)) ([]*group, error) {
	by := cfg.groupBy()
	seen := map[string]bool{}
	var out []*group
	for _, t := range templates {
		name := groupName(t, by)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		g, err := buildGroup(t, name, cfg, namespace, slicesOf, configMap)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no template node has the %s that names its node group", by)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cfg.Name < out[j].Cfg.Name })
	return out, nil
}

func buildGroup(t *v1.Node, name string, cfg *Config, namespace string,
	slicesOf func(node string) ([]*resourceapi.ResourceSlice, error),
	configMap func(namespace, name string) (map[string]string, error)) (*group, error) {
	what := fmt.Sprintf("template node %s (node group %s)", t.Name, name)
	size := func(key string, def int) (int, error) {
		v, ok := t.Annotations[key]
		if !ok || v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: annotation %s: %q is not a non-negative integer", what, key, v)
		}
		return n, nil
	}
	minSize, err := size(MinSizeAnnotation, 0)
	if err != nil {
		return nil, err
	}
	maxSize, err := size(MaxSizeAnnotation, DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	desired, err := size(DesiredSizeAnnotation, minSize)
	if err != nil {
		return nil, err
	}
	if maxSize < minSize {
		return nil, fmt.Errorf("%s: annotation %s: %d is below min-count %d", what, MaxSizeAnnotation, maxSize, minSize)
	}
	if desired < minSize || desired > maxSize {
		return nil, fmt.Errorf("%s: annotation %s: %d is outside [%d, %d]", what, DesiredSizeAnnotation, desired, minSize, maxSize)
	}
	opts, err := nodegroup.ParseOptions(t.Annotations)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	specs, err := templateSlices(t, namespace, slicesOf, configMap)
	if err != nil {
		return nil, err
	}
	g := &nodegroup.NodeGroup{}
	g.APIVersion, g.Kind = nodegroup.APIVersion, nodegroup.Kind
	g.Name = name
	g.Spec.MinSize, g.Spec.MaxSize = minSize, maxSize
	g.Spec.Template = *templateNode(t, name, cfg.Nodes.SkipTaint)
	g.Spec.ResourceSlices = specs
	if errs := g.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", what, errs.ToAggregate())
	}
	return &group{Group: apinodes.Group{Cfg: g, Options: opts}}, nil
}

// templateSlices are what a new node of the group publishes, from the
// same sources as the Cluster API provider's: the template node's
// draxr.dev/template-resource-slices annotation, else the ConfigMap its
// draxr.dev/template-resource-slices-configmap annotation names (in the
// provider's namespace unless namespace/name), else CA's dra-driver and
// gpu-count capacity annotations; with none of them, the slices a live
// template node publishes (readNodesFrom: cluster), copied.
func templateSlices(t *v1.Node, namespace string,
	slicesOf func(node string) ([]*resourceapi.ResourceSlice, error),
	configMap func(namespace, name string) (map[string]string, error)) ([]resourceapi.ResourceSliceSpec, error) {
	r := capi.Resource{Kind: "template Node", Namespace: namespace, Name: t.Name, Annotations: t.Annotations}
	var data map[string]string
	if ns, name, ok, err := r.ConfigMapRef(); err != nil {
		return nil, err
	} else if ok {
		if data, err = configMap(ns, name); err != nil {
			return nil, fmt.Errorf("template node %s: annotation %s: ConfigMap %s/%s: %w", t.Name, capi.TemplateSlicesConfigMapAnnotation, ns, name, err)
		}
	}
	specs, err := r.TemplateSlices(data)
	if err != nil || len(specs) > 0 || t.UID == "" || slicesOf == nil {
		return specs, err
	}
	live, err := slicesOf(t.Name)
	if err != nil {
		return nil, fmt.Errorf("template node %s: its ResourceSlices: %w", t.Name, err)
	}
	return nodegroup.CopySliceSpecs(live), nil
}

// templateNode is what a new node of the group looks like: the template's
// labels, annotations, taints, capacity and allocatable, marked as kwok's
// and the group's; what named the template machine goes.
func templateNode(t *v1.Node, group string, skipTaint bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-fake-" + t.Name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	for k, v := range t.Labels {
		if k != v1.LabelHostname {
			n.Labels[k] = v
		}
	}
	for k, v := range t.Annotations {
		switch k {
		case MinSizeAnnotation, MaxSizeAnnotation, DesiredSizeAnnotation, capi.TemplateSlicesAnnotation:
		default:
			n.Annotations[k] = v
		}
	}
	n.Annotations[FakeNodeAnnotation] = FakeNodeValue
	n.Annotations[GroupNameAnnotation] = group
	for _, taint := range t.Spec.Taints {
		if taint.Key != v1.TaintNodeNotReady && taint.Key != v1.TaintNodeUnreachable && taint.Key != TaintKey {
			n.Spec.Taints = append(n.Spec.Taints, taint)
		}
	}
	if !skipTaint {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: TaintKey, Value: "true", Effect: v1.TaintEffectNoSchedule})
	}
	n.Status.Capacity = t.Status.Capacity.DeepCopy()
	n.Status.Allocatable = t.Status.Allocatable.DeepCopy()
	return n
}
