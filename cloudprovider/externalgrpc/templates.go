package externalgrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Where a group's template slices came from, first found wins (a
// member's copy also serves, for TemplateCacheExpiry, loops in which no
// member is fit to copy):
const (
	// SourceMember: a Ready member node's published slices, copied as the
	// other providers copy them (nodegroup.CopySliceSpecs).
	SourceMember = "member node"
	// SourceConfigMap: the template ConfigMap's entry for the group.
	SourceConfigMap = "ConfigMap"
	// SourceService: the service's NodeGroupTemplateNodeInfoResponse
	// resourceSlices (field 3, draxr's extension of the protocol). It
	// comes before the synthetic slice: it describes the devices, the
	// synthetic slice only guesses them.
	SourceService = "service"
	// SourceSynthetic: CA's synthetic slice from the template node's GPU
	// label, DRA driver and GPU count.
	SourceSynthetic = "synthetic"
)

// GPUResource is the extended resource a GPU count is read from when the
// template node has no gpu-count annotation (CA's default GPU resource).
const GPUResource v1.ResourceName = "nvidia.com/gpu"

// template is a group's template for one loop, or why it has none.
type template struct {
	group *nodegroup.NodeGroup
	// source says where the slices came from ("" without slices).
	source string
	err    error
}

// buildTemplate finds the group's template node (a Ready member's copy,
// else the service's) and its slices, in the order of the Source*
// constants.
func (g *group) buildTemplate(ctx context.Context) *template {
	p := g.p
	prefix := nodegroup.NodeNamePrefix(g.id)
	var node *v1.Node
	var specs []resourceapi.ResourceSliceSpec
	source := ""
	if m := g.member(); m != nil {
		node = capi.Sanitize(m, prefix, p.opts.Taints)
		own, err := apinodes.NodeSlices(ctx, p.opts.Slices, p.opts.Kube, m.Name)
		if err != nil {
			return &template{err: fmt.Errorf("node group %s: slices of member node %s: %w", g.id, m.Name, err)}
		}
		if len(own) > 0 {
			specs, source = nodegroup.CopySliceSpecs(own), SourceMember
		}
		p.remember(g.id, node, specs)
	} else if c := p.recall(g.id); c != nil {
		// No member fit to copy this loop (all unready, new or gone): the
		// last copy serves, as CA's node info cache does.
		node, specs = c.node, c.specs
		if specs != nil {
			source = SourceMember
		}
	}
	if specs == nil {
		p.mu.Lock()
		cfg, cfgErr := p.templateSpecs, p.templateErr
		p.mu.Unlock()
		if cfgErr != nil {
			return &template{err: fmt.Errorf("node group %s: %w", g.id, cfgErr)}
		}
		s, err := cfg.For(g.id)
		if err != nil {
			return &template{err: fmt.Errorf("node group %s: %w", g.id, err)}
		}
		if s != nil {
			specs, source = s, SourceConfigMap
		}
	}
	if node == nil || specs == nil {
		svcNode, svcSpecs, err := g.serviceTemplate(ctx)
		switch {
		case err != nil && node == nil:
			return &template{err: err}
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Service template not read; the member node's copy serves", "nodeGroup", g.id, "err", err)
		}
		if node == nil {
			node = svcNode
		}
		if specs == nil && len(svcSpecs) > 0 {
			specs, source = svcSpecs, SourceService
		}
	}
	if node == nil {
		return &template{err: fmt.Errorf("node group %s: no Ready member node to copy and the service's NodeGroupTemplateNodeInfo returns no node", g.id)}
	}
	if specs == nil {
		spec, err := g.syntheticSlice(ctx, node)
		if err != nil {
			return &template{err: err}
		}
		if spec != nil {
			specs, source = []resourceapi.ResourceSliceSpec{*spec}, SourceSynthetic
		}
	}
	ng := &nodegroup.NodeGroup{}
	ng.APIVersion, ng.Kind = nodegroup.APIVersion, nodegroup.Kind
	ng.Name = g.id
	ng.Spec.MinSize, ng.Spec.MaxSize = g.min, g.max
	ng.Spec.Template = *node
	ng.Spec.ResourceSlices = specs
	klog.FromContext(ctx).V(4).Info("Template", "nodeGroup", g.id, "slices", len(specs), "source", source)
	return &template{group: ng, source: source}
}

// copiedMember is a group's template as copied from a member, and when.
type copiedMember struct {
	node   *v1.Node
	specs  []resourceapi.ResourceSliceSpec
	copied time.Time
}

func (p *Provider) remember(id string, node *v1.Node, specs []resourceapi.ResourceSliceSpec) {
	if p.opts.TemplateCacheExpiry <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.copied[id] = &copiedMember{node: node, specs: specs, copied: p.opts.Now()}
}

// recall is the group's last copy while younger than
// TemplateCacheExpiry, else nil.
func (p *Provider) recall(id string) *copiedMember {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.copied[id]
	if c == nil || p.opts.Now().Sub(c.copied) >= p.opts.TemplateCacheExpiry {
		delete(p.copied, id)
		return nil
	}
	return &copiedMember{node: c.node.DeepCopy(), specs: copySpecs(c.specs), copied: c.copied}
}

// member is a node of the group fit to copy as its template (as the
// clusterapi provider chooses one), or nil.
func (g *group) member() *v1.Node {
	instances, err := g.Nodes()
	if err != nil {
		return nil
	}
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	now := g.p.opts.Now()
	for _, in := range instances {
		if n := g.p.nodes[in.ProviderID]; n != nil && clusterapi.FitToCopy(n, g.p.opts.Taints, now) {
			return n
		}
	}
	return nil
}

// serviceTemplate asks the service for the group's template node and,
// from services that send them, its slices. Unimplemented or an empty
// answer is no node and no error.
func (g *group) serviceTemplate(ctx context.Context) (*v1.Node, []resourceapi.ResourceSliceSpec, error) {
	res, err := call(ctx, g.p, g.p.opts.Client.NodeGroupTemplateNodeInfo, &protos.NodeGroupTemplateNodeInfoRequest{Id: g.id})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, mapError("NodeGroupTemplateNodeInfo", g.id, err)
	}
	return DecodeTemplate(g.id, res)
}

// DecodeTemplate reads a NodeGroupTemplateNodeInfoResponse: nodeBytes
// (nil when empty) and resourceSlices, each a ResourceSlice whose spec
// becomes a template slice (nodeName and pool are filled in per node).
func DecodeTemplate(id string, res *protos.NodeGroupTemplateNodeInfoResponse) (*v1.Node, []resourceapi.ResourceSliceSpec, error) {
	var node *v1.Node
	if b := res.GetNodeBytes(); len(b) > 0 {
		node = &v1.Node{}
		if err := node.Unmarshal(b); err != nil {
			return nil, nil, fmt.Errorf("node group %s: NodeGroupTemplateNodeInfo nodeBytes: not a Node: %w", id, err)
		}
	}
	var specs []resourceapi.ResourceSliceSpec
	for i, b := range res.GetResourceSlices() {
		s := &resourceapi.ResourceSlice{}
		if err := s.Unmarshal(b); err != nil {
			return nil, nil, fmt.Errorf("node group %s: NodeGroupTemplateNodeInfo resourceSlices[%d]: not a ResourceSlice: %w", id, i, err)
		}
		if s.Spec.Driver == "" {
			return nil, nil, fmt.Errorf("node group %s: NodeGroupTemplateNodeInfo resourceSlices[%d]: spec.driver is required", id, i)
		}
		spec := s.Spec.DeepCopy()
		spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
		specs = append(specs, *spec)
	}
	return node, specs, nil
}

// syntheticSlice is CA's synthetic slice for a GPU node: the node has
// the service's GPU label, names its DRA driver (label or annotation
// capi.DRADriverAnnotation) and counts its GPUs (annotation
// capi.GPUCountAnnotation, else its GPUResource capacity). Nil when it
// is no such node.
func (g *group) syntheticSlice(ctx context.Context, node *v1.Node) (*resourceapi.ResourceSliceSpec, error) {
	driver := node.Labels[capi.DRADriverAnnotation]
	if driver == "" {
		driver = node.Annotations[capi.DRADriverAnnotation]
	}
	if driver == "" {
		return nil, nil
	}
	label, err := g.p.GPULabel(ctx)
	if errors.Is(err, cloudprovider.ErrNotImplemented) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node group %s: %w", g.id, err)
	}
	if label == "" || node.Labels[label] == "" {
		return nil, nil
	}
	count := int64(0)
	if v, ok := node.Annotations[capi.GPUCountAnnotation]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("node group %s: template node's annotation %s: %q is not a non-negative integer", g.id, capi.GPUCountAnnotation, v)
		}
		count = n
	} else if q, ok := node.Status.Capacity[GPUResource]; ok {
		count = q.Value()
	}
	if count == 0 {
		return nil, nil
	}
	spec := capi.SyntheticSlice(driver, int(count))
	return &spec, nil
}

// TemplateConfig is the template ConfigMap: each key holds one entry
//
//	nodeGroup: <id>            # or nodeGroupRegexp: <regular expression over ids>
//	resourceSlices: [<ResourceSliceSpec>, ...]
//
// A group's slices are those of the entry naming it; else those of the
// one entry whose expression matches its whole id (two matching is an
// error naming both keys).
type TemplateConfig struct {
	// Source is "ConfigMap namespace/name", for errors.
	Source   string
	exact    map[string]templateEntry
	patterns []templateEntry
}

type templateEntry struct {
	key    string
	re     *regexp.Regexp
	slices []resourceapi.ResourceSliceSpec
}

// ParseTemplateConfig reads a template ConfigMap's data; errors name the
// ConfigMap and the key.
func ParseTemplateConfig(source string, data map[string]string) (*TemplateConfig, error) {
	c := &TemplateConfig{Source: source, exact: map[string]templateEntry{}}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var raw struct {
			NodeGroup       string          `json:"nodeGroup"`
			NodeGroupRegexp string          `json:"nodeGroupRegexp"`
			ResourceSlices  json.RawMessage `json:"resourceSlices"`
		}
		where := fmt.Sprintf("%s key %q", source, k)
		if err := yaml.UnmarshalStrict([]byte(data[k]), &raw); err != nil {
			return nil, fmt.Errorf("%s: %s (want nodeGroup or nodeGroupRegexp, and resourceSlices)", where, yamlError(err))
		}
		if (raw.NodeGroup == "") == (raw.NodeGroupRegexp == "") {
			return nil, fmt.Errorf("%s: exactly one of nodeGroup and nodeGroupRegexp is required", where)
		}
		if len(raw.ResourceSlices) == 0 || string(raw.ResourceSlices) == "null" {
			return nil, fmt.Errorf("%s: resourceSlices is required", where)
		}
		slices, err := capi.ParseSliceSpecs(raw.ResourceSlices)
		if err != nil {
			return nil, fmt.Errorf("%s: resourceSlices: %w", where, err)
		}
		e := templateEntry{key: k, slices: slices}
		if raw.NodeGroup != "" {
			if prev, ok := c.exact[raw.NodeGroup]; ok {
				return nil, fmt.Errorf("%s: node group %s is already given by key %q", where, raw.NodeGroup, prev.key)
			}
			c.exact[raw.NodeGroup] = e
			continue
		}
		if e.re, err = regexp.Compile("^(?:" + raw.NodeGroupRegexp + ")$"); err != nil {
			return nil, fmt.Errorf("%s: nodeGroupRegexp: %w", where, err)
		}
		c.patterns = append(c.patterns, e)
	}
	return c, nil
}

// For returns the group's slices, nil when no entry names or matches it
// (or there is no ConfigMap).
func (c *TemplateConfig) For(id string) ([]resourceapi.ResourceSliceSpec, error) {
	if c == nil {
		return nil, nil
	}
	if e, ok := c.exact[id]; ok {
		return copySpecs(e.slices), nil
	}
	var found *templateEntry
	for i := range c.patterns {
		if c.patterns[i].re.MatchString(id) {
			if found != nil {
				return nil, fmt.Errorf("%s: keys %q and %q both match node group %s; give it an entry of its own (nodeGroup)",
					c.Source, found.key, c.patterns[i].key, id)
			}
			found = &c.patterns[i]
		}
	}
	if found == nil {
		return nil, nil
	}
	return copySpecs(found.slices), nil
}

func copySpecs(in []resourceapi.ResourceSliceSpec) []resourceapi.ResourceSliceSpec {
	out := make([]resourceapi.ResourceSliceSpec, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// readTemplateConfig reads the template ConfigMap, if one is configured.
func (p *Provider) readTemplateConfig(ctx context.Context) (*TemplateConfig, error) {
	if p.opts.TemplateConfigMap == "" {
		return nil, nil
	}
	ns, name, _ := strings.Cut(p.opts.TemplateConfigMap, "/")
	source := "ConfigMap " + p.opts.TemplateConfigMap
	cm, err := p.opts.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s (template_slices_config_map in --cloud-config) does not exist", source)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return ParseTemplateConfig(source, cm.Data)
}

// yamlError is a YAML decoding error without the decoder's layers of
// prefixes.
func yamlError(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg
}
