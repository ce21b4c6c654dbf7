// Package kwok is CA's kwok cloud provider with DRA: node groups read
// from the kwok-provider-config ConfigMap (template nodes from the
// kwok-provider-templates ConfigMap or from the cluster's own nodes),
// whose new nodes are Node objects marked kwok.x-k8s.io/node: fake for
// the kwok controller to make Ready and run their pods. Beyond CA's, a
// new node publishes its group's template ResourceSlices, which go with
// it. Nodes are created and deleted through cloudprovider/apinodes, as
// the local provider's are.
//
// Group membership is read from the node informer's cache, so a loop
// with nothing to do makes no API call here.
package kwok

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/apinodes"
)

// Name is the provider's --cloud-provider name.
const Name = "kwok"

// ProviderIDPrefix starts the provider IDs of the nodes it makes, as CA
// gives them ("kwok:<node>").
const ProviderIDPrefix = "kwok:"

// pendingExpiry: a node created (or deleted) that the informer has not
// shown after this long is taken from the informer alone again.
const pendingExpiry = 2 * time.Minute

// Options configure the provider.
type Options struct {
	Client kubernetes.Interface
	// Namespace holds the config and templates ConfigMaps.
	Namespace string
	// ConfigName is the config ConfigMap; DefaultConfigName if empty.
	ConfigName string
	// Nodes is a synced node informer's lister (the autoscaler's).
	Nodes corelisters.NodeLister
	// Slices, when set, is a ResourceSlice informer's lister: a member
	// whose slices are missing (the autoscaler stopped between creating
	// the node and its slices) publishes them at the next Refresh.
	Slices resourcelisters.ResourceSliceLister
	// ReadOnly: Refresh publishes nothing (a dry run).
	ReadOnly bool
	Now      func() time.Time
}

// Provider implements cloudprovider.Provider.
type Provider struct {
	opts   Options
	config *Config
	by     groupBy
	groups []*group

	mu sync.Mutex
	// members is the informer's view at the last Refresh, per group.
	members map[string][]*v1.Node
	// created and deleted are this provider's changes the informer may
	// not show yet: node name to group and time.
	created, deleted map[string]pending
}

type pending struct {
	group string
	at    time.Time
}

var _ cloudprovider.Provider = &Provider{}

// New reads the config and template ConfigMaps (or the cluster's nodes)
// and builds the groups; a bad config is an error naming the ConfigMap,
// key and field, a bad template one naming the node and annotation.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Client == nil || opts.Nodes == nil {
		return nil, errors.New("kwok provider: a client and a node lister are required")
	}
	if opts.ConfigName == "" {
		opts.ConfigName = DefaultConfigName
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	source := fmt.Sprintf("ConfigMap %s/%s", opts.Namespace, opts.ConfigName)
	cm, err := opts.Client.CoreV1().ConfigMaps(opts.Namespace).Get(ctx, opts.ConfigName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kwok provider config: %s: %w", source, err)
	}
	data, ok := cm.Data[ConfigKey]
	if !ok {
		return nil, fmt.Errorf("kwok provider config: %s has no key %q", source, ConfigKey)
	}
	cfg, err := ParseConfig(source+" key "+ConfigKey, data)
	if err != nil {
		return nil, fmt.Errorf("kwok provider config: %w", err)
	}
	templates, err := readTemplates(ctx, opts.Client, opts.Namespace, cfg)
	if err != nil {
		return nil, fmt.Errorf("kwok provider: %w", err)
	}
	slicesOf := func(node string) ([]*resourceapi.ResourceSlice, error) {
		list, err := opts.Client.ResourceV1().ResourceSlices().List(ctx,
			metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + node})
		if err != nil {
			return nil, err
		}
		var own []*resourceapi.ResourceSlice
		for i := range list.Items {
			if s := &list.Items[i]; s.Spec.NodeName != nil && *s.Spec.NodeName == node {
				own = append(own, s)
			}
		}
		return own, nil
	}
	configMap := func(namespace, name string) (map[string]string, error) {
		cm, err := opts.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cm.Data, nil
	}
	groups, err := buildGroups(templates, cfg, opts.Namespace, slicesOf, configMap)
	if err != nil {
		return nil, fmt.Errorf("kwok provider: %w", err)
	}
	p := &Provider{opts: opts, config: cfg, by: cfg.groupBy(), groups: groups,
		members: map[string][]*v1.Node{}, created: map[string]pending{}, deleted: map[string]pending{}}
	for _, g := range groups {
		g.p = p
	}
	return p, nil
}

// Config is the configuration the provider was built from.
func (p *Provider) Config() *Config { return p.config }

// NodeGroups implements cloudprovider.Provider.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup { return apinodes.NodeGroups(p.groups) }

// NodeGroupForNode: nodes with a kwok provider ID, by their group
// annotation, else the configured label or annotation (as CA).
func (p *Provider) NodeGroupForNode(node *v1.Node) (cloudprovider.NodeGroup, error) {
	if !strings.HasPrefix(node.Spec.ProviderID, Name) {
		return nil, nil
	}
	name := groupName(node, p.by)
	for _, g := range p.groups {
		if g.Cfg.Name == name {
			return g, nil
		}
	}
	return nil, nil
}

// member reports whether n is a node this provider made for a group.
func member(n *v1.Node) (string, bool) {
	if n.Annotations[FakeNodeAnnotation] != FakeNodeValue || !strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) {
		return "", false
	}
	g := n.Annotations[GroupNameAnnotation]
	return g, g != ""
}

// Refresh reads the groups' members from the informer and publishes the
// slices a member lacks (only with Options.Slices).
func (p *Provider) Refresh(ctx context.Context) error {
	nodes, err := p.opts.Nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("kwok provider: list nodes from the informer: %w", err)
	}
	byGroup := map[string][]*v1.Node{}
	seen := map[string]bool{}
	for _, n := range nodes {
		if g, ok := member(n); ok {
			byGroup[g] = append(byGroup[g], n)
			seen[n.Name] = true
		}
	}
	now := p.opts.Now()
	p.mu.Lock()
	p.members = byGroup
	for name, c := range p.created {
		if seen[name] || now.Sub(c.at) > pendingExpiry {
			delete(p.created, name)
		}
	}
	for name, d := range p.deleted {
		if !seen[name] || now.Sub(d.at) > pendingExpiry {
			delete(p.deleted, name)
		}
	}
	p.mu.Unlock()
	if p.opts.ReadOnly || p.opts.Slices == nil {
		return nil
	}
	for _, g := range p.groups {
		if len(g.Cfg.Spec.ResourceSlices) == 0 {
			continue
		}
		for _, n := range byGroup[g.Cfg.Name] {
			if n.DeletionTimestamp != nil || g.hasSlices(n) {
				continue
			}
			_, slices := g.Cfg.NewNode(n.Name)
			if err := apinodes.PublishSlices(ctx, p.opts.Client, n, slices); err != nil {
				return err
			}
		}
	}
	return nil
}

// names is the group's nodes: the informer's members, with this
// provider's creations and deletions it does not show yet.
func (p *Provider) names(group string) map[string]*v1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]*v1.Node{}
	for _, n := range p.members[group] {
		if _, gone := p.deleted[n.Name]; !gone {
			out[n.Name] = n
		}
	}
	for name, c := range p.created {
		if _, ok := out[name]; !ok && c.group == group {
			out[name] = nil
		}
	}
	return out
}

type group struct {
	apinodes.Group
	p *Provider
}

// TargetSize counts the group's Node objects: a node exists as soon as
// it is asked for.
func (g *group) TargetSize() (int, error) { return len(g.p.names(g.Cfg.Name)), nil }

// IncreaseSize creates delta nodes named <group>-<5 random characters>
// (as CA) with their slices; nodes created before a failure stay and
// count.
func (g *group) IncreaseSize(ctx context.Context, delta int) error {
	names, err := g.newNames(delta)
	if err != nil {
		return err
	}
	return apinodes.For(ctx, names, g.createNode)
}

// AtomicIncreaseSize creates delta nodes, or none: nodes created before a
// failure are deleted again.
func (g *group) AtomicIncreaseSize(ctx context.Context, delta int) error {
	names, err := g.newNames(delta)
	if err != nil {
		return err
	}
	return apinodes.AllOrNone(ctx, names, g.createNode, g.deleteNode)
}

func (g *group) deleteNode(ctx context.Context, name string) error {
	if err := apinodes.Delete(ctx, g.p.opts.Client, name); err != nil {
		return err
	}
	g.p.mu.Lock()
	delete(g.p.created, name)
	g.p.mu.Unlock()
	return nil
}

// newNames checks delta against the max size and picks delta new names.
func (g *group) newNames(delta int) ([]string, error) {
	if delta <= 0 {
		return nil, fmt.Errorf("node group %s: size increase must be positive, got %d", g.Cfg.Name, delta)
	}
	current := g.p.names(g.Cfg.Name)
	if len(current)+delta > g.Cfg.Spec.MaxSize {
		return nil, cloudprovider.MaxSizeExceeded(g.Cfg.Name, len(current), delta, g.Cfg.Spec.MaxSize)
	}
	names := make([]string, 0, delta)
	taken := map[string]bool{}
	for len(names) < delta {
		name := g.Cfg.Name + "-" + rand.String(5)
		if _, ok := current[name]; ok || taken[name] {
			continue
		}
		taken[name] = true
		names = append(names, name)
	}
	return names, nil
}

func (g *group) createNode(ctx context.Context, name string) error {
	node, slices := g.Cfg.NewNode(name)
	node.Spec.ProviderID = ProviderIDPrefix + name
	// kwok's node-initialize stage fills in the conditions: the node is
	// NotReady until the kwok controller takes it up.
	node.Status.Conditions = nil
	created, err := apinodes.CreateNode(ctx, g.p.opts.Client, g.Cfg.Name, node)
	if err != nil {
		return err
	}
	g.p.mu.Lock()
	g.p.created[name] = pending{group: g.Cfg.Name, at: g.p.opts.Now()}
	g.p.mu.Unlock()
	return apinodes.PublishSlices(ctx, g.p.opts.Client, created, slices)
}

// DecreaseTargetSize: a node exists as soon as it is asked for, so there
// is never an unregistered node to give up.
func (g *group) DecreaseTargetSize(_ context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: target size decrease must be negative, got %d", g.Cfg.Name, delta)
	}
	return fmt.Errorf("node group %s: cannot give up %d nodes: all %d are registered (nodes are created as Node objects)",
		g.Cfg.Name, -delta, len(g.p.names(g.Cfg.Name)))
}

// DeleteNodes removes members (kwok's fake nodes of this group only) with
// their slices and bound pods, never below min size.
func (g *group) DeleteNodes(ctx context.Context, nodes []*v1.Node) error {
	current := g.p.names(g.Cfg.Name)
	if len(current)-len(nodes) < g.Cfg.Spec.MinSize {
		return fmt.Errorf("node group %s: deleting %d of %d nodes goes below min size %d", g.Cfg.Name, len(nodes), len(current), g.Cfg.Spec.MinSize)
	}
	for _, n := range nodes {
		if grp, ok := member(n); !ok || grp != g.Cfg.Name {
			return fmt.Errorf("node group %s: node %s is not one of its kwok nodes (annotations %s=%s and %s=%s, provider ID %s<name>)",
				g.Cfg.Name, n.Name, FakeNodeAnnotation, FakeNodeValue, GroupNameAnnotation, g.Cfg.Name, ProviderIDPrefix)
		}
	}
	for _, n := range nodes {
		if err := apinodes.Delete(ctx, g.p.opts.Client, n.Name); err != nil {
			return fmt.Errorf("node group %s: %w", g.Cfg.Name, err)
		}
		g.p.mu.Lock()
		delete(g.p.created, n.Name)
		g.p.deleted[n.Name] = pending{group: g.Cfg.Name, at: g.p.opts.Now()}
		g.p.mu.Unlock()
	}
	return nil
}

// Nodes lists the group's nodes, all running: they exist once created.
func (g *group) Nodes() ([]cloudprovider.Instance, error) {
	names := g.p.names(g.Cfg.Name)
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	out := make([]cloudprovider.Instance, 0, len(sorted))
	for _, name := range sorted {
		out = append(out, cloudprovider.Instance{ProviderID: ProviderIDPrefix + name, NodeName: name,
			Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
	}
	return out, nil
}

// TemplateNodeInfo instantiates the group's template node and slices.
func (g *group) TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error) {
	node, slices := g.Cfg.NewNode("template-" + g.Cfg.Name)
	return node, slices, nil
}

// hasSlices reports whether the informer holds every template slice of
// the node (by name, as NewNode names them).
func (g *group) hasSlices(n *v1.Node) bool {
	for _, name := range g.Cfg.SliceNames(n.Name) {
		if _, err := g.p.opts.Slices.Get(name); err != nil {
			return false
		}
	}
	return true
}
