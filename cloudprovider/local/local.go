// Package local is a cloud provider without a cloud: node groups described
// by NodeGroup objects, whose nodes are Node objects created in the API
// server, as kwok does. A new node turns Ready after NodeReadyDelay and its
// DRA driver publishes the group's ResourceSlices after SlicesDelay, so the
// "node up, devices not yet published" window exists as on real machines.
//
// Everything is level-triggered from the API server's state (Refresh), so a
// restarted autoscaler picks up nodes that are still coming up.
package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/simulator/nodegroup"
)

// ProviderIDPrefix starts every provider ID this provider assigns.
const ProviderIDPrefix = "draxr-local:///"

// Options configure the provider.
type Options struct {
	// Client writes the nodes and slices; with ReadOnly and both listers
	// it may be nil (draxr simulate --scale-down over a dump).
	Client kubernetes.Interface
	// Nodes and Slices, when set, are synced informers' listers (the
	// autoscaler's): Refresh and templates read them, so a steady loop
	// sends the API server no LIST. Without them each Refresh lists the
	// groups' nodes, and a template its member's slices.
	Nodes          corelisters.NodeLister
	Slices         resourcelisters.ResourceSliceLister
	Groups         []*nodegroup.NodeGroup
	NodeReadyDelay time.Duration
	SlicesDelay    time.Duration // after the node is Ready
	Now            func() time.Time
	// Launcher, when set, starts real machines instead of creating Node
	// objects (the delays then come from the machines themselves).
	Launcher Launcher
	// ReadOnly: Refresh reads the groups' nodes and moves none of them
	// along (a dry run, or the planner over a dump).
	ReadOnly bool
}

// Launcher starts and stops machines that register their own Node: tests
// plug in real test-node processes here. The shipped binary has none.
type Launcher interface {
	// Start launches the node name of group g with the provider ID the
	// node must register with.
	Start(ctx context.Context, g *nodegroup.NodeGroup, name, providerID string) error
	// Launched lists the group's nodes started, registered or not.
	Launched(group string) []string
	// Stop ends the node's machine.
	Stop(ctx context.Context, node string) error
}

// Provider implements cloudprovider.Provider.
type Provider struct {
	opts   Options
	mu     sync.Mutex
	groups []*group
	// nodes is the API server's view at the last Refresh, per group.
	nodes map[string][]*v1.Node
	// published remembers nodes whose slices exist (publishedKey).
	published map[string]bool
}

var _ cloudprovider.Provider = &Provider{}

// New returns a provider for the groups; a group with an invalid
// NodeReadyDelayAnnotation or autoscaling-options-* annotation is an error
// naming the group.
func New(opts Options) (*Provider, error) {
	readsListers := opts.ReadOnly && opts.Nodes != nil && opts.Slices != nil
	if opts.Client == nil && !readsListers {
		return nil, errors.New("local provider: a client is required, unless it is read only and reads node and slice listers")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Provider{opts: opts, nodes: map[string][]*v1.Node{}, published: map[string]bool{}}
	for _, g := range opts.Groups {
		grp := &group{p: p, Group: apinodes.Group{Cfg: g}}
		if v, ok := g.Annotations[NodeReadyDelayAnnotation]; ok && v != "never" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("NodeGroup %s: metadata.annotations[%s]: want a non-negative duration or \"never\", got %q",
					g.Name, NodeReadyDelayAnnotation, v)
			}
			grp.readyDelay = d
		}
		o, err := nodegroup.ParseOptions(g.Annotations)
		if err != nil {
			var oe *nodegroup.OptionError
			if errors.As(err, &oe) {
				return nil, fmt.Errorf("NodeGroup %s: metadata.annotations[%s]: %w", g.Name, oe.Annotation, oe.Err)
			}
			return nil, fmt.Errorf("NodeGroup %s: %w", g.Name, err)
		}
		grp.Options = o
		p.groups = append(p.groups, grp)
	}
	sort.Slice(p.groups, func(i, j int) bool { return p.groups[i].Cfg.Name < p.groups[j].Cfg.Name })
	return p, nil
}

// NodeGroups implements cloudprovider.Provider.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup { return apinodes.NodeGroups(p.groups) }

// NodeGroupForNode matches by provider ID, then by the group label.
func (p *Provider) NodeGroupForNode(node *v1.Node) (cloudprovider.NodeGroup, error) {
	name := nodegroup.Group(node)
	if rest, ok := strings.CutPrefix(node.Spec.ProviderID, ProviderIDPrefix); ok {
		name, _, _ = strings.Cut(rest, "/")
	}
	for _, g := range p.groups {
		if g.Cfg.Name == name {
			return g, nil
		}
	}
	return nil, nil
}

// Refresh reads the groups' nodes and moves each along its life: Ready
// after NodeReadyDelay, slices published SlicesDelay after that.
func (p *Provider) Refresh(ctx context.Context) error {
	nodes, err := p.listNodes(ctx)
	if err != nil {
		return fmt.Errorf("local provider: list nodes: %w", err)
	}
	byGroup := map[string][]*v1.Node{}
	for _, n := range nodes {
		byGroup[nodegroup.Group(n)] = append(byGroup[nodegroup.Group(n)], n)
	}
	p.mu.Lock()
	p.nodes = byGroup
	p.mu.Unlock()
	if p.opts.ReadOnly {
		return nil
	}
	for _, g := range p.groups {
		for _, n := range byGroup[g.Cfg.Name] {
			advance := g.advance
			if p.opts.Launcher != nil {
				advance = g.liftNotReadyTaint
			}
			if err := advance(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// listNodes reads the nodes with a group label from the lister, else with
// one LIST. Nodes from the lister are the cache's: advance copies before
// it writes.
func (p *Provider) listNodes(ctx context.Context) ([]*v1.Node, error) {
	if p.opts.Nodes != nil {
		all, err := p.opts.Nodes.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		var nodes []*v1.Node
		for _, n := range all {
			if _, ok := n.Labels[nodegroup.GroupLabel]; ok {
				nodes = append(nodes, n)
			}
		}
		// In the order a LIST returns them: Nodes lists instances so.
		slices.SortFunc(nodes, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
		return nodes, nil
	}
	list, err := p.opts.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodegroup.GroupLabel})
	if err != nil {
		return nil, err
	}
	nodes := make([]*v1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	return nodes, nil
}

func (p *Provider) groupNodes(name string) []*v1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[name]
}

type group struct {
	apinodes.Group
	p *Provider
	// readyDelay is NodeReadyDelayAnnotation's duration, when set.
	readyDelay time.Duration
}

// TargetSize counts the group's nodes: Node objects, which are created at
// once, and test nodes started but not yet registered.
func (g *group) TargetSize() (int, error) { return len(g.names()), nil }

func (g *group) names() map[string]bool {
	names := map[string]bool{}
	for _, n := range g.p.groupNodes(g.Cfg.Name) {
		names[n.Name] = true
	}
	if l := g.p.opts.Launcher; l != nil {
		for _, n := range l.Launched(g.Cfg.Name) {
			names[n] = true
		}
	}
	return names
}

func (g *group) IncreaseSize(ctx context.Context, delta int) error {
	names, err := g.newNames(delta)
	if err != nil {
		return err
	}
	if l := g.p.opts.Launcher; l != nil {
		// Machines start one at a time: a launcher may share local
		// resources (ports, folders) between starts.
		for _, name := range names {
			if err := l.Start(ctx, g.Cfg, name, g.providerID(name)); err != nil {
				return fmt.Errorf("node group %s: start node %s: %w", g.Cfg.Name, name, err)
			}
		}
		return nil
	}
	return apinodes.For(ctx, names, g.createNode)
}

// AtomicIncreaseSize creates delta nodes, or none: machines started or
// nodes created before a failure are removed again.
func (g *group) AtomicIncreaseSize(ctx context.Context, delta int) error {
	names, err := g.newNames(delta)
	if err != nil {
		return err
	}
	if l := g.p.opts.Launcher; l != nil {
		// One at a time, as IncreaseSize starts them.
		for i, name := range names {
			if err := l.Start(ctx, g.Cfg, name, g.providerID(name)); err != nil {
				err = fmt.Errorf("node group %s: start node %s: %w", g.Cfg.Name, name, err)
				var undo []error
				for _, started := range names[:i] {
					if serr := l.Stop(context.WithoutCancel(ctx), started); serr != nil {
						undo = append(undo, fmt.Errorf("node %s: stop machine: %w", started, serr))
					} else if derr := apinodes.Delete(context.WithoutCancel(ctx), g.p.opts.Client, started); derr != nil {
						undo = append(undo, derr)
					}
				}
				return errors.Join(append([]error{fmt.Errorf("atomic increase of %d nodes failed; the %d started were stopped: %w", delta, i, err)}, undo...)...)
			}
		}
		return nil
	}
	return apinodes.AllOrNone(ctx, names, g.createNode, func(ctx context.Context, name string) error {
		return apinodes.Delete(ctx, g.p.opts.Client, name)
	})
}

// newNames checks delta against the max size and names the new nodes.
func (g *group) newNames(delta int) ([]string, error) {
	if delta <= 0 {
		return nil, fmt.Errorf("node group %s: size increase must be positive, got %d", g.Cfg.Name, delta)
	}
	current := g.names()
	if len(current)+delta > g.Cfg.Spec.MaxSize {
		return nil, cloudprovider.MaxSizeExceeded(g.Cfg.Name, len(current), delta, g.Cfg.Spec.MaxSize)
	}
	next := nextIndex(g.Cfg.Name, current)
	names := make([]string, delta)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", g.Cfg.Name, next+i)
	}
	return names, nil
}

func (g *group) providerID(name string) string { return ProviderIDPrefix + g.Cfg.Name + "/" + name }

// createNode creates the Node object of a new machine, NotReady until
// Refresh moves it along.
func (g *group) createNode(ctx context.Context, name string) error {
	node, _ := g.Cfg.NewNode(name)
	node.Spec.ProviderID = g.providerID(name)
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "Provisioning",
		LastTransitionTime: metav1.NewTime(g.p.opts.Now())}}
	status := node.Status
	created, err := apinodes.CreateNode(ctx, g.p.opts.Client, g.Cfg.Name, node)
	if err != nil {
		return err
	}
	created.Status = status
	if _, err := g.p.opts.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node group %s: node %s status: %w", g.Cfg.Name, name, err)
	}
	return nil
}

func nextIndex(group string, names map[string]bool) int {
	next := 0
	for n := range names {
		if i, err := strconv.Atoi(strings.TrimPrefix(n, group+"-")); err == nil && i >= next {
			next = i + 1
		}
	}
	return next
}

// DecreaseTargetSize stops machines the launcher started that have not
// registered. Without a launcher nodes exist as soon as they are asked
// for, so there is never an unregistered node to give up.
func (g *group) DecreaseTargetSize(ctx context.Context, delta int) error {
	l := g.p.opts.Launcher
	if l == nil {
		return cloudprovider.ErrNotImplemented
	}
	if delta >= 0 {
		return fmt.Errorf("node group %s: target size decrease must be negative, got %d", g.Cfg.Name, delta)
	}
	registered := map[string]bool{}
	for _, n := range g.p.groupNodes(g.Cfg.Name) {
		registered[n.Name] = true
	}
	var unregistered []string
	for _, name := range l.Launched(g.Cfg.Name) {
		if !registered[name] {
			unregistered = append(unregistered, name)
		}
	}
	if -delta > len(unregistered) {
		return fmt.Errorf("node group %s: cannot give up %d nodes, only %d are unregistered", g.Cfg.Name, -delta, len(unregistered))
	}
	sort.Strings(unregistered)
	for _, name := range unregistered[len(unregistered)+delta:] {
		if err := l.Stop(ctx, name); err != nil {
			return fmt.Errorf("node group %s: stop unregistered node %s: %w", g.Cfg.Name, name, err)
		}
	}
	return nil
}

// DeleteNodes removes the nodes' slices and the Node objects. With no
// kubelet behind them, the pods still bound to a deleted machine are
// deleted too, as they would die with it.
func (g *group) DeleteNodes(ctx context.Context, nodes []*v1.Node) error {
	current := len(g.names())
	if current-len(nodes) < g.Cfg.Spec.MinSize {
		return fmt.Errorf("node group %s: deleting %d of %d nodes goes below min size %d", g.Cfg.Name, len(nodes), current, g.Cfg.Spec.MinSize)
	}
	c := g.p.opts.Client
	for _, n := range nodes {
		if ng := nodegroup.Group(n); ng != g.Cfg.Name {
			return fmt.Errorf("node group %s: node %s belongs to %q", g.Cfg.Name, n.Name, ng)
		}
		if l := g.p.opts.Launcher; l != nil {
			if err := l.Stop(ctx, n.Name); err != nil {
				return fmt.Errorf("node %s: stop machine: %w", n.Name, err)
			}
		}
		if err := apinodes.Delete(ctx, c, n.Name); err != nil {
			return err
		}
	}
	return nil
}

// Nodes lists registered nodes as running and machines the launcher
// started that have not registered yet as creating.
func (g *group) Nodes() ([]cloudprovider.Instance, error) {
	var out []cloudprovider.Instance
	registered := map[string]bool{}
	for _, n := range g.p.groupNodes(g.Cfg.Name) {
		registered[n.Name] = true
		out = append(out, cloudprovider.Instance{ProviderID: n.Spec.ProviderID, NodeName: n.Name,
			Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
	}
	if l := g.p.opts.Launcher; l != nil {
		for _, name := range l.Launched(g.Cfg.Name) {
			if !registered[name] {
				out = append(out, cloudprovider.Instance{ProviderID: g.providerID(name),
					Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}})
			}
		}
	}
	return out, nil
}

// TemplateNodeInfo instantiates the group's template. When the config
// gives no slices but a live node of the group publishes some, those are
// copied (the early KEP's template-from-an-existing-node idea).
func (g *group) TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error) {
	cfg := g.Cfg
	if len(cfg.Spec.ResourceSlices) == 0 {
		if specs := g.memberSlices(); len(specs) > 0 {
			cfg = cfg.DeepCopy()
			cfg.Spec.ResourceSlices = specs
		}
	}
	node, slices := cfg.NewNode("template-" + cfg.Name)
	return node, slices, nil
}

func (g *group) memberSlices() []resourceapi.ResourceSliceSpec {
	for _, n := range g.p.groupNodes(g.Cfg.Name) {
		own, err := apinodes.NodeSlices(context.Background(), g.p.opts.Slices, g.p.opts.Client, n.Name)
		if err == nil && len(own) > 0 {
			// Without this node's device taints and unhealthy marks.
			return nodegroup.CopySliceSpecs(own)
		}
	}
	return nil
}
