// Package fakeprovider is a cloud provider for tests that fails on
// purpose: per node group, IncreaseSize / DeleteNodes / DecreaseTargetSize
// errors of any class, instances that never register, nodes that register
// but never turn Ready, slow registration and instances the provider
// reports in error. Nodes are Node objects in a (fake) clientset, moved
// along by Advance on the test's clock. It is a test tool: no shipped
// binary links it.
package fakeprovider

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/nodegroup"
)

// ProviderIDPrefix starts every provider ID of this provider.
const ProviderIDPrefix = "fake:///"

// Faults are what a group does wrong.
type Faults struct {
	IncreaseSizeErr error
	// AtomicIncreaseSizeErr fails AtomicIncreaseSize (nothing is added);
	// ErrNotImplemented makes the group one that cannot promise it.
	AtomicIncreaseSizeErr error
	DeleteNodesErr        error
	DecreaseTargetSizeErr error
	TargetSizeErr         error
	TemplateErr           error
	// NeverRegister: new instances never get a Node object.
	NeverRegister bool
	// NeverReady: new nodes register but stay NotReady.
	NeverReady bool
	// RegistrationDelay is how long a new instance takes to register.
	RegistrationDelay time.Duration
	// ReadyDelay is how long a registered node takes to turn Ready (and
	// publish its ResourceSlices).
	ReadyDelay time.Duration
	// InstanceError makes new instances fail: they stay Creating with
	// this error info and never register.
	InstanceError *cloudprovider.InstanceErrorInfo
	// DeletionDelay: a deleted instance leaves the target size at once
	// but stays, Deleting, with its Node object, this long (Cluster API:
	// replicas lowered, the Machine and its node going later).
	DeletionDelay time.Duration
}

// Provider implements cloudprovider.Provider.
type Provider struct {
	client kubernetes.Interface
	now    func() time.Time

	mu         sync.Mutex
	groups     []*Group
	refreshErr error
}

var _ cloudprovider.Provider = &Provider{}

// New returns a provider that creates nodes in client at the times now
// gives.
func New(client kubernetes.Interface, now func() time.Time) *Provider {
	return &Provider{client: client, now: now}
}

// AddGroup adds a group with the given faults.
func (p *Provider) AddGroup(ng *nodegroup.NodeGroup, f Faults) *Group {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := &Group{p: p, cfg: ng, faults: f}
	p.groups = append(p.groups, g)
	return g
}

// RemoveGroup drops a group, as a provider's refresh drops one whose
// configuration turned invalid; its instances are left as they are.
func (p *Provider) RemoveGroup(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups = slices.DeleteFunc(p.groups, func(g *Group) bool { return g.cfg.Name == name })
}

// SetRefreshError makes Refresh fail (nil clears it).
func (p *Provider) SetRefreshError(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshErr = err
}

// NodeGroups implements cloudprovider.Provider.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloudprovider.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out
}

// NodeGroupForNode matches by provider ID, then by the group label.
func (p *Provider) NodeGroupForNode(node *v1.Node) (cloudprovider.NodeGroup, error) {
	name := nodegroup.Group(node)
	if rest, ok := strings.CutPrefix(node.Spec.ProviderID, ProviderIDPrefix); ok {
		name, _, _ = strings.Cut(rest, "/")
	}
	for _, g := range p.NodeGroups() {
		if g.Id() == name {
			return g, nil
		}
	}
	return nil, nil
}

// Refresh implements cloudprovider.Provider; it does not touch the API
// server (Advance does), so a loop sees exactly what the test set up.
func (p *Provider) Refresh(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshErr
}

// Advance registers instances whose registration delay has passed and
// turns Ready nodes whose ready delay has passed, at the clock's time.
func (p *Provider) Advance(ctx context.Context) error {
	for _, g := range p.NodeGroups() {
		if err := g.(*Group).advance(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Synced says whether the listers show the API server's nodes and
// ResourceSlices as they are: tests wait on it after Advance so that a
// loop reads what Advance wrote. (The fake clientset keeps no resource
// versions, so objects are compared whole.)
func (p *Provider) Synced(ctx context.Context, nodeLister corelisters.NodeLister, sliceLister resourcelisters.ResourceSliceLister) bool {
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	cachedNodes, err := nodeLister.List(labels.Everything())
	if err != nil || len(cachedNodes) != len(nodes.Items) {
		return false
	}
	for i := range nodes.Items {
		cached, err := nodeLister.Get(nodes.Items[i].Name)
		if err != nil || !apiequality.Semantic.DeepEqual(cached, &nodes.Items[i]) {
			return false
		}
	}
	slices, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	cachedSlices, err := sliceLister.List(labels.Everything())
	if err != nil || len(cachedSlices) != len(slices.Items) {
		return false
	}
	for i := range slices.Items {
		if _, err := sliceLister.Get(slices.Items[i].Name); err != nil {
			return false
		}
	}
	return true
}

type instance struct {
	name, providerID string
	created          time.Time
	registered       bool
	ready            bool
	errInfo          *cloudprovider.InstanceErrorInfo
	faults           Faults    // the group's faults when it was asked for
	goneAt           time.Time // set while Deleting (DeletionDelay)
}

func (in *instance) deleting() bool { return !in.goneAt.IsZero() }

// live counts the instances that are not being deleted.
func (g *Group) live() int {
	n := 0
	for _, in := range g.instances {
		if !in.deleting() {
			n++
		}
	}
	return n
}

// Group is one fake node group. It records the calls made to it.
type Group struct {
	p   *Provider
	cfg *nodegroup.NodeGroup

	mu         sync.Mutex
	faults     Faults
	instances  []*instance
	next       int
	increases  []int
	atomic     []int
	decreases  []int
	deleted    []string
	calledFail []string
}

var _ cloudprovider.NodeGroup = &Group{}

// SetFaults changes the group's faults; instances already asked for keep
// the faults they were created with.
func (g *Group) SetFaults(f Faults) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults = f
}

// Increases lists the successful IncreaseSize deltas.
func (g *Group) Increases() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.increases...)
}

// AtomicIncreases lists the successful AtomicIncreaseSize deltas (they
// are not in Increases).
func (g *Group) AtomicIncreases() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.atomic...)
}

// Decreases lists the successful DecreaseTargetSize deltas.
func (g *Group) Decreases() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.decreases...)
}

// Deleted lists the nodes (names, or provider IDs of unregistered
// instances) DeleteNodes removed.
func (g *Group) Deleted() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.deleted...)
}

// FailedCalls lists the calls that returned an injected error.
func (g *Group) FailedCalls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calledFail...)
}

func (g *Group) Id() string   { return g.cfg.Name }
func (g *Group) MinSize() int { return g.cfg.Spec.MinSize }
func (g *Group) MaxSize() int { return g.cfg.Spec.MaxSize }

// TargetSize counts every instance, registered or not.
func (g *Group) TargetSize() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.faults.TargetSizeErr != nil {
		g.calledFail = append(g.calledFail, "TargetSize")
		return 0, g.faults.TargetSizeErr
	}
	return g.live(), nil
}

// IncreaseSize adds delta instances, or fails with the injected error.
func (g *Group) IncreaseSize(_ context.Context, delta int) error {
	return g.increase("IncreaseSize", func(f Faults) error { return f.IncreaseSizeErr }, &g.increases, delta)
}

// AtomicIncreaseSize adds delta instances, or none with the injected
// error.
func (g *Group) AtomicIncreaseSize(_ context.Context, delta int) error {
	return g.increase("AtomicIncreaseSize", func(f Faults) error { return f.AtomicIncreaseSizeErr }, &g.atomic, delta)
}

// increase adds delta instances and records delta in done, or fails
// with the fault that faultOf picks.
func (g *Group) increase(op string, faultOf func(Faults) error, done *[]int, delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if fault := faultOf(g.faults); fault != nil {
		g.calledFail = append(g.calledFail, fmt.Sprintf("%s(%d)", op, delta))
		return fault
	}
	if err := g.add(delta); err != nil {
		return err
	}
	*done = append(*done, delta)
	return nil
}

// add creates delta instances; g.mu is held.
func (g *Group) add(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.cfg.Name, delta)
	}
	if g.live()+delta > g.cfg.Spec.MaxSize {
		return cloudprovider.MaxSizeExceeded(g.cfg.Name, g.live(), delta, g.cfg.Spec.MaxSize)
	}
	for i := 0; i < delta; i++ {
		name := fmt.Sprintf("%s-%d", g.cfg.Name, g.next)
		g.next++
		g.instances = append(g.instances, &instance{name: name, providerID: ProviderIDPrefix + g.cfg.Name + "/" + name,
			created: g.p.now(), errInfo: g.faults.InstanceError, faults: g.faults})
	}
	return nil
}

// DecreaseTargetSize drops -delta unregistered instances, newest first.
func (g *Group) DecreaseTargetSize(_ context.Context, delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.faults.DecreaseTargetSizeErr != nil {
		g.calledFail = append(g.calledFail, fmt.Sprintf("DecreaseTargetSize(%d)", delta))
		return g.faults.DecreaseTargetSizeErr
	}
	unregistered := 0
	for _, in := range g.instances {
		if !in.registered {
			unregistered++
		}
	}
	if delta >= 0 || -delta > unregistered {
		return fmt.Errorf("node group %s: cannot decrease target by %d with %d unregistered instances", g.cfg.Name, delta, unregistered)
	}
	left := -delta
	for i := len(g.instances) - 1; i >= 0 && left > 0; i-- {
		if !g.instances[i].registered {
			g.instances = append(g.instances[:i], g.instances[i+1:]...)
			left--
		}
	}
	g.decreases = append(g.decreases, delta)
	return nil
}

// DeleteNodes removes instances by provider ID (or node name) and their
// Node objects.
func (g *Group) DeleteNodes(ctx context.Context, nodes []*v1.Node) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.faults.DeleteNodesErr != nil {
		var names []string
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		g.calledFail = append(g.calledFail, fmt.Sprintf("DeleteNodes(%s)", strings.Join(names, ",")))
		return g.faults.DeleteNodesErr
	}
	if g.live()-len(nodes) < g.cfg.Spec.MinSize {
		return fmt.Errorf("node group %s: deleting %d of %d nodes goes below min size %d", g.cfg.Name, len(nodes), g.live(), g.cfg.Spec.MinSize)
	}
	for _, n := range nodes {
		i := g.find(n)
		if i < 0 || g.instances[i].deleting() {
			return fmt.Errorf("node group %s: node %s (%s) is not in the group", g.cfg.Name, n.Name, n.Spec.ProviderID)
		}
		in := g.instances[i]
		if g.faults.DeletionDelay > 0 {
			in.goneAt = g.p.now().Add(g.faults.DeletionDelay)
			g.deleted = append(g.deleted, in.name)
			continue
		}
		if in.registered {
			if err := g.p.client.CoreV1().Nodes().Delete(ctx, in.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("node %s: delete: %w", in.name, err)
			}
			g.deleted = append(g.deleted, in.name)
		} else {
			g.deleted = append(g.deleted, in.providerID)
		}
		g.instances = append(g.instances[:i], g.instances[i+1:]...)
	}
	return nil
}

func (g *Group) find(n *v1.Node) int {
	for i, in := range g.instances {
		if (n.Spec.ProviderID != "" && in.providerID == n.Spec.ProviderID) || (n.Spec.ProviderID == "" && in.name == n.Name) {
			return i
		}
	}
	return -1
}

// Nodes lists instances: registered ones Running, others Creating (with
// their error info when they failed).
func (g *Group) Nodes() ([]cloudprovider.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []cloudprovider.Instance
	for _, in := range g.instances {
		st := &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: in.errInfo}
		name := ""
		if in.registered {
			st.State, name = cloudprovider.InstanceRunning, in.name
		}
		if in.deleting() {
			st.State = cloudprovider.InstanceDeleting
		}
		out = append(out, cloudprovider.Instance{ProviderID: in.providerID, NodeName: name, Status: st})
	}
	return out, nil
}

// GetOptions implements cloudprovider.NodeGroup: the defaults with the
// NodeGroup's cluster.x-k8s.io/autoscaling-options-* annotations, as the
// local provider reads them; a bad one is the error.
func (g *Group) GetOptions(defaults cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
	o, err := nodegroup.ParseOptions(g.cfg.Annotations)
	if err != nil {
		return nil, err
	}
	out := defaults.WithOverrides(o)
	return &out, nil
}

// TemplateNodeInfo implements cloudprovider.NodeGroup.
func (g *Group) TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error) {
	g.mu.Lock()
	err := g.faults.TemplateErr
	g.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	n, s := g.cfg.NewNode("template-" + g.cfg.Name)
	return n, s, nil
}

// AddReadyNodes adds n registered, Ready nodes (with their slices), as if
// they had been there before the test.
func (g *Group) AddReadyNodes(ctx context.Context, n int) error {
	g.mu.Lock()
	var added []*instance
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", g.cfg.Name, g.next)
		g.next++
		in := &instance{name: name, providerID: ProviderIDPrefix + g.cfg.Name + "/" + name, created: g.p.now()}
		g.instances = append(g.instances, in)
		added = append(added, in)
	}
	g.mu.Unlock()
	for _, in := range added {
		if err := g.register(ctx, in); err != nil {
			return err
		}
		if err := g.markReady(ctx, in); err != nil {
			return err
		}
	}
	return nil
}

func (g *Group) advance(ctx context.Context) error {
	now := g.p.now()
	g.mu.Lock()
	instances := append([]*instance(nil), g.instances...)
	g.mu.Unlock()
	for _, in := range instances {
		if in.deleting() {
			if !now.Before(in.goneAt) {
				if err := g.finishDeletion(ctx, in); err != nil {
					return err
				}
			}
			continue
		}
		f := in.faults
		if !in.registered && in.errInfo == nil && !f.NeverRegister && !now.Before(in.created.Add(f.RegistrationDelay)) {
			if err := g.register(ctx, in); err != nil {
				return err
			}
		}
		if in.registered && !in.ready && !f.NeverReady && !now.Before(in.created.Add(f.RegistrationDelay+f.ReadyDelay)) {
			if err := g.markReady(ctx, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishDeletion removes a Deleting instance and its Node object.
func (g *Group) finishDeletion(ctx context.Context, in *instance) error {
	if in.registered {
		if err := g.p.client.CoreV1().Nodes().Delete(ctx, in.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: delete: %w", in.name, err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.instances = slices.DeleteFunc(g.instances, func(x *instance) bool { return x == in })
	return nil
}

// register creates the Node, NotReady, created at the clock's time.
func (g *Group) register(ctx context.Context, in *instance) error {
	node, _ := g.cfg.NewNode(in.name)
	node.Spec.ProviderID = in.providerID
	node.CreationTimestamp = metav1.NewTime(g.p.now())
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady",
		LastTransitionTime: node.CreationTimestamp}}
	if _, err := g.p.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("fake provider: register node %s: %w", in.name, err)
	}
	g.mu.Lock()
	in.registered = true
	g.mu.Unlock()
	return nil
}

// markReady turns the node Ready and publishes its ResourceSlices.
func (g *Group) markReady(ctx context.Context, in *instance) error {
	c := g.p.client
	node, err := c.CoreV1().Nodes().Get(ctx, in.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("fake provider: node %s: %w", in.name, err)
	}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastTransitionTime: metav1.NewTime(g.p.now())}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("fake provider: node %s ready: %w", in.name, err)
	}
	_, slices := g.cfg.NewNode(in.name)
	for _, s := range slices {
		if _, err := c.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("fake provider: node %s slice %s: %w", in.name, s.Name, err)
		}
	}
	g.mu.Lock()
	in.ready = true
	g.mu.Unlock()
	return nil
}

// Names lists the group's instances' node names, sorted (test helper).
func (g *Group) Names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, in := range g.instances {
		out = append(out, in.name)
	}
	sort.Strings(out)
	return out
}
