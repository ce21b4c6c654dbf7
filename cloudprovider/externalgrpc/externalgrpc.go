// Package externalgrpc is the Cluster Autoscaler's externalgrpc cloud
// provider as a draxr provider: a gRPC client of CA's CloudProvider
// service (protos), so any cloud CA's provider service wraps scales
// draxr's node groups. As CA's client does, it keeps the answers of
// NodeGroups, NodeGroupForNode and (draxr's addition) NodeGroupNodes and
// the templates for one loop, dropping them at Refresh. gRPC status codes
// become draxr's typed provider errors, so the failure model backs groups
// off as for any provider. Templates carry ResourceSlices, which the
// protocol lacks; templates.go says where they come from.
package externalgrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/taints"
)

// Name is the --cloud-provider value.
const Name = "externalgrpc"

// Options configure the provider.
type Options struct {
	// Client reaches the provider service (Config.Dial).
	Client protos.CloudProviderClient
	// Conn, when set, is closed by Cleanup.
	Conn io.Closer
	// Timeout bounds each call; DefaultTimeout when 0.
	Timeout time.Duration
	// Kube reaches the cluster the nodes join: its Nodes and
	// ResourceSlices (templates copied from members) and the template
	// ConfigMap.
	Kube kubernetes.Interface
	// Nodes, when set, is a synced node informer's lister (the
	// autoscaler's): Refresh reads nodes from it instead of listing them.
	Nodes corelisters.NodeLister
	// Slices, when set, is a synced ResourceSlice informer's lister:
	// templates copied from members read it.
	Slices resourcelisters.ResourceSliceLister
	// TemplateConfigMap is "namespace/name" of the template ConfigMap, or "".
	TemplateConfigMap string
	// Taints says which taints of a member node its group's template
	// leaves out (--startup-taint, --status-taint).
	Taints taints.Config
	// TemplateCacheExpiry is how long a template copied from a member
	// serves its group once no member is fit to copy
	// (--node-info-cache-expire-time); 0 keeps no copy.
	TemplateCacheExpiry time.Duration
	Now                 func() time.Time
}

// Provider implements cloudprovider.Provider over the service.
type Provider struct {
	opts Options

	mu     sync.Mutex
	groups []*group
	byID   map[string]*group
	// forNode caches NodeGroupForNode per node name and provider ID, nil
	// for a node of no group; dropped at Refresh, as in CA.
	forNode map[string]*group
	// nodes are the cluster's Nodes by provider ID as of Refresh.
	nodes map[string]*v1.Node
	// gpuLabel is GPULabel's answer, asked once (it never changes).
	gpuLabel *string
	// templateSpecs is the template ConfigMap read at Refresh, nil
	// without one; templateErr is why it could not be read.
	templateSpecs *TemplateConfig
	templateErr   error
	// copied keeps each group's last template copied from a member
	// (templates.go); groups that are gone are dropped at Refresh.
	copied map[string]*copiedMember
}

var _ cloudprovider.Provider = &Provider{}

// New returns a provider; Refresh reads the groups.
func New(opts Options) (*Provider, error) {
	if opts.Client == nil || opts.Kube == nil {
		return nil, errors.New("externalgrpc provider: a service client and a Kubernetes client are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{opts: opts, byID: map[string]*group{}, forNode: map[string]*group{}, nodes: map[string]*v1.Node{},
		copied: map[string]*copiedMember{}}, nil
}

// call runs one RPC under the per-call timeout.
func call[Req, Resp any](ctx context.Context, p *Provider, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	return rpc(ctx, req)
}

// Refresh drops the loop's answers, tells the service a loop starts
// (its Refresh) and reads the groups and the cluster's nodes.
func (p *Provider) Refresh(ctx context.Context) error {
	if _, err := call(ctx, p, p.opts.Client.Refresh, &protos.RefreshRequest{}); err != nil {
		return p.clear(mapError("Refresh", "", err))
	}
	res, err := call(ctx, p, p.opts.Client.NodeGroups, &protos.NodeGroupsRequest{})
	if err != nil {
		return p.clear(mapError("NodeGroups", "", err))
	}
	byProviderID, err := apinodes.ByProviderID(ctx, p.opts.Nodes, p.opts.Kube)
	if err != nil {
		return p.clear(fmt.Errorf("externalgrpc provider: list nodes: %w", err))
	}
	var groups []*group
	byID := map[string]*group{}
	for _, ng := range res.GetNodeGroups() {
		if ng.GetId() == "" || byID[ng.GetId()] != nil {
			return p.clear(fmt.Errorf("externalgrpc provider: NodeGroups returned a group with an empty or repeated id %q", ng.GetId()))
		}
		if ng.GetMinSize() < 0 || ng.GetMaxSize() < ng.GetMinSize() {
			return p.clear(fmt.Errorf("externalgrpc provider: NodeGroups: node group %s has minSize %d and maxSize %d; want 0 <= minSize <= maxSize",
				ng.GetId(), ng.GetMinSize(), ng.GetMaxSize()))
		}
		g := &group{p: p, id: ng.GetId(), min: int(ng.GetMinSize()), max: int(ng.GetMaxSize())}
		groups = append(groups, g)
		byID[g.id] = g
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].id < groups[j].id })
	specs, specsErr := p.readTemplateConfig(ctx)
	p.mu.Lock()
	p.groups, p.byID, p.forNode, p.nodes = groups, byID, map[string]*group{}, byProviderID
	p.templateSpecs, p.templateErr = specs, specsErr
	for id := range p.copied {
		if byID[id] == nil {
			delete(p.copied, id)
		}
	}
	p.mu.Unlock()
	return nil
}

// clear forgets the last loop's answers, so that a failed Refresh never
// leaves the loop acting on stale groups, and returns err.
func (p *Provider) clear(err error) error {
	p.mu.Lock()
	p.groups, p.byID, p.forNode = nil, map[string]*group{}, map[string]*group{}
	p.mu.Unlock()
	return err
}

// NodeGroups returns the groups read at Refresh.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloudprovider.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out
}

// NodeGroupForNode asks the service once per node and loop. A node it
// places in no group (an empty id) is nil.
func (p *Provider) NodeGroupForNode(node *v1.Node) (cloudprovider.NodeGroup, error) {
	if node == nil {
		return nil, errors.New("externalgrpc provider: NodeGroupForNode of a nil node")
	}
	key := node.Name + "\x00" + node.Spec.ProviderID
	p.mu.Lock()
	g, cached := p.forNode[key]
	p.mu.Unlock()
	if cached {
		if g == nil {
			return nil, nil
		}
		return g, nil
	}
	res, err := call(context.Background(), p, p.opts.Client.NodeGroupForNode, &protos.NodeGroupForNodeRequest{Node: grpcNode(node)})
	if err != nil {
		return nil, mapError("NodeGroupForNode of node "+node.Name, "", err)
	}
	id := res.GetNodeGroup().GetId()
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != "" {
		g = p.byID[id]
		if g == nil {
			// A group NodeGroups did not list (added since Refresh): known
			// by its bounds only until the next loop lists it.
			ng := res.GetNodeGroup()
			g = &group{p: p, id: id, min: int(ng.GetMinSize()), max: int(ng.GetMaxSize())}
		}
	}
	p.forNode[key] = g
	if g == nil {
		return nil, nil
	}
	return g, nil
}

// Cleanup tells the service the autoscaler stops (CA calls it on exit)
// and closes the connection.
func (p *Provider) Cleanup(ctx context.Context) error {
	_, err := call(ctx, p, p.opts.Client.Cleanup, &protos.CleanupRequest{})
	err = mapError("Cleanup", "", err)
	if p.opts.Conn != nil {
		err = errors.Join(err, p.opts.Conn.Close())
	}
	return err
}

// GPULabel is the service's GPU label, asked once; "" when it cannot
// tell.
func (p *Provider) GPULabel(ctx context.Context) (string, error) {
	p.mu.Lock()
	if p.gpuLabel != nil {
		defer p.mu.Unlock()
		return *p.gpuLabel, nil
	}
	p.mu.Unlock()
	res, err := call(ctx, p, p.opts.Client.GPULabel, &protos.GPULabelRequest{})
	if err != nil {
		return "", mapError("GPULabel", "", err)
	}
	label := res.GetLabel()
	p.mu.Lock()
	p.gpuLabel = &label
	p.mu.Unlock()
	return label, nil
}

func grpcNode(n *v1.Node) *protos.ExternalGrpcNode {
	return &protos.ExternalGrpcNode{ProviderID: n.Spec.ProviderID, Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}
}

// mapError turns a service error into draxr's: Unimplemented is
// ErrNotImplemented (the optional operation's defaults apply);
// ResourceExhausted is out of resources (stockout, quota), so the
// scale-up failure is recorded as such; every other code is a typed
// error of the other class whose code is the gRPC code's name. A nil err
// stays nil.
func mapError(method, groupID string, err error) error {
	if err == nil {
		return nil
	}
	where := "externalgrpc provider: " + method
	if groupID != "" {
		where += " of node group " + groupID
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch st.Code() {
	case codes.Unimplemented:
		return fmt.Errorf("%s: %s: %w", where, st.Message(), cloudprovider.ErrNotImplemented)
	case codes.ResourceExhausted:
		return &cloudprovider.Error{Class: cloudprovider.OutOfResourcesErrorClass, Code: st.Code().String(),
			Err: fmt.Errorf("%s: %s", where, st.Message())}
	}
	msg := st.Message()
	if st.Code() == codes.Unavailable {
		// The transport's reason (refused connection, failed handshake)
		// is the message; say which side failed.
		msg = "service unreachable: " + msg
		if strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") || strings.Contains(msg, "handshake") {
			msg += " (the TLS handshake failed: check cert, key and cacert in --cloud-config against the service's certificates)"
		}
	}
	return &cloudprovider.Error{Class: cloudprovider.OtherErrorClass, Code: st.Code().String(), Err: fmt.Errorf("%s: %s", where, msg)}
}

// group is one node group; its answers last the loop.
type group struct {
	p        *Provider
	id       string
	min, max int

	mu sync.Mutex
	// instances caches NodeGroupNodes until a change to the group.
	instances []cloudprovider.Instance
	// template caches the loop's template (or why there is none).
	template *template
	// price caches the loop's PricingNodePrice answer.
	price *priceAnswer
}

type priceAnswer struct {
	perHour float64
	err     error
}

func (g *group) Id() string   { return g.id }
func (g *group) MinSize() int { return g.min }
func (g *group) MaxSize() int { return g.max }

// TargetSize asks the service each time, as CA does: it changes under
// the loop as the group scales.
func (g *group) TargetSize() (int, error) {
	res, err := call(context.Background(), g.p, g.p.opts.Client.NodeGroupTargetSize, &protos.NodeGroupTargetSizeRequest{Id: g.id})
	if err != nil {
		return 0, mapError("NodeGroupTargetSize", g.id, err)
	}
	return int(res.GetTargetSize()), nil
}

// IncreaseSize checks the delta and the max size before asking, so that
// a refusal past the max is typed the same for every provider.
func (g *group) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.id, delta)
	}
	target, err := g.TargetSize()
	if err != nil {
		return err
	}
	if target+delta > g.max {
		return cloudprovider.MaxSizeExceeded(g.id, target, delta, g.max)
	}
	defer g.changed()
	_, err = call(ctx, g.p, g.p.opts.Client.NodeGroupIncreaseSize, &protos.NodeGroupIncreaseSizeRequest{Id: g.id, Delta: int32(delta)})
	return mapError("NodeGroupIncreaseSize", g.id, err)
}

// AtomicIncreaseSize is not in CA's externalgrpc protocol: callers fall
// back to IncreaseSize, as CA does.
func (g *group) AtomicIncreaseSize(context.Context, int) error {
	return cloudprovider.ErrNotImplemented
}

// DecreaseTargetSize passes the negative delta on; the service refuses
// to give up registered nodes.
func (g *group) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: size decrease must be negative, got %d", g.id, delta)
	}
	defer g.changed()
	_, err := call(ctx, g.p, g.p.opts.Client.NodeGroupDecreaseTargetSize, &protos.NodeGroupDecreaseTargetSizeRequest{Id: g.id, Delta: int32(delta)})
	return mapError("NodeGroupDecreaseTargetSize", g.id, err)
}

// DeleteNodes refuses to go below the min size before asking: CA's loop
// never asks that, and a service may not check it.
func (g *group) DeleteNodes(ctx context.Context, nodes []*v1.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	target, err := g.TargetSize()
	if err != nil {
		return err
	}
	if target-len(nodes) < g.min {
		return fmt.Errorf("node group %s: deleting %d of %d nodes goes below min size %d", g.id, len(nodes), target, g.min)
	}
	req := &protos.NodeGroupDeleteNodesRequest{Id: g.id}
	for _, n := range nodes {
		req.Nodes = append(req.Nodes, grpcNode(n))
	}
	defer g.changed()
	_, err = call(ctx, g.p, g.p.opts.Client.NodeGroupDeleteNodes, req)
	return mapError("NodeGroupDeleteNodes", g.id, err)
}

// changed drops the cached instances after a change to the group.
func (g *group) changed() {
	g.mu.Lock()
	g.instances = nil
	g.mu.Unlock()
}

// Nodes lists the group's instances (cached for the loop), with node
// names from the cluster's nodes and CA's instance status.
func (g *group) Nodes() ([]cloudprovider.Instance, error) {
	g.mu.Lock()
	if g.instances != nil {
		defer g.mu.Unlock()
		return append([]cloudprovider.Instance(nil), g.instances...), nil
	}
	g.mu.Unlock()
	res, err := call(context.Background(), g.p, g.p.opts.Client.NodeGroupNodes, &protos.NodeGroupNodesRequest{Id: g.id})
	if err != nil {
		return nil, mapError("NodeGroupNodes", g.id, err)
	}
	out := make([]cloudprovider.Instance, 0, len(res.GetInstances()))
	g.p.mu.Lock()
	for _, in := range res.GetInstances() {
		i := cloudprovider.Instance{ProviderID: in.GetId(), Status: instanceStatus(in.GetStatus())}
		if n := g.p.nodes[in.GetId()]; n != nil {
			i.NodeName = n.Name
		}
		out = append(out, i)
	}
	g.p.mu.Unlock()
	g.mu.Lock()
	g.instances = out
	g.mu.Unlock()
	return append([]cloudprovider.Instance(nil), out...), nil
}

// instanceStatus reads CA's InstanceStatus: an unspecified state is
// "cannot tell" (nil); error info counts only with a code, as in CA.
func instanceStatus(s *protos.InstanceStatus) *cloudprovider.InstanceStatus {
	var state cloudprovider.InstanceState
	switch s.GetInstanceState() {
	case protos.InstanceStatus_instanceRunning:
		state = cloudprovider.InstanceRunning
	case protos.InstanceStatus_instanceCreating:
		state = cloudprovider.InstanceCreating
	case protos.InstanceStatus_instanceDeleting:
		state = cloudprovider.InstanceDeleting
	default:
		return nil
	}
	out := &cloudprovider.InstanceStatus{State: state}
	if e := s.GetErrorInfo(); e.GetErrorCode() != "" {
		class := cloudprovider.OtherErrorClass
		if e.GetInstanceErrorClass() == int32(cloudprovider.OutOfResourcesErrorClass) {
			class = cloudprovider.OutOfResourcesErrorClass
		}
		out.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: class, ErrorCode: e.GetErrorCode(), ErrorMessage: e.GetErrorMessage()}
	}
	return out
}

// caNoOptions is how CA's example provider service answers for a group
// its cloud provider gives no options (a plain error, not Unimplemented):
// the defaults apply, as for Unimplemented, rather than an error each loop.
const caNoOptions = "GetOptions not implemented"

// GetOptions asks the service for the group's options over defaults.
// Unimplemented (or no answer) means the defaults; a duration the
// service leaves out keeps its default, and the options the protocol
// does not carry (MaxNodeStartupTime) are the defaults.
func (g *group) GetOptions(defaults cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
	res, err := call(context.Background(), g.p, g.p.opts.Client.NodeGroupGetOptions, &protos.NodeGroupAutoscalingOptionsRequest{
		Id: g.id,
		Defaults: &protos.NodeGroupAutoscalingOptions{
			ScaleDownUtilizationThreshold:    defaults.ScaleDownUtilizationThreshold,
			ScaleDownGpuUtilizationThreshold: defaults.ScaleDownGpuUtilizationThreshold,
			ScaleDownUnneededDuration:        durationpb.New(defaults.ScaleDownUnneededTime),
			ScaleDownUnreadyDuration:         durationpb.New(defaults.ScaleDownUnreadyTime),
			MaxNodeProvisionDuration:         durationpb.New(defaults.MaxNodeProvisionTime),
		},
	})
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unknown && st.Message() == caNoOptions {
		return nil, fmt.Errorf("node group %s: %s: %w", g.id, caNoOptions, cloudprovider.ErrNotImplemented)
	}
	if err != nil {
		return nil, mapError("NodeGroupGetOptions", g.id, err)
	}
	o := res.GetNodeGroupAutoscalingOptions()
	if o == nil {
		return nil, nil
	}
	out := defaults
	out.ScaleDownUtilizationThreshold = o.GetScaleDownUtilizationThreshold()
	out.ScaleDownGpuUtilizationThreshold = o.GetScaleDownGpuUtilizationThreshold()
	for _, d := range []struct {
		from *durationpb.Duration
		to   *time.Duration
	}{
		{o.GetScaleDownUnneededDuration(), &out.ScaleDownUnneededTime},
		{o.GetScaleDownUnreadyDuration(), &out.ScaleDownUnreadyTime},
		{o.GetMaxNodeProvisionDuration(), &out.MaxNodeProvisionTime},
	} {
		if d.from != nil {
			*d.to = d.from.AsDuration()
		}
	}
	return &out, nil
}

// TemplateNodeInfo is the group's template for this loop (templates.go).
func (g *group) TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error) {
	g.mu.Lock()
	t := g.template
	g.mu.Unlock()
	if t == nil {
		t = g.buildTemplate(context.Background())
		g.mu.Lock()
		g.template = t
		g.mu.Unlock()
	}
	if t.err != nil {
		return nil, nil, t.err
	}
	node, slices := t.group.NewNode("template-" + nodegroup.NodeNamePrefix(g.id))
	return node, slices, nil
}

// NodePrice asks the service what one node of the group's template costs
// over the next hour (PricingNodePrice, as CA's pricing model asks), once
// a loop: the answer is kept with the group, which Refresh replaces.
// Unimplemented is ErrNotImplemented (no price).
func (g *group) NodePrice() (float64, error) {
	g.mu.Lock()
	cached := g.price
	g.mu.Unlock()
	if cached != nil {
		return cached.perHour, cached.err
	}
	a := &priceAnswer{}
	if node, _, err := g.TemplateNodeInfo(); err != nil {
		a.err = err
	} else {
		start := g.p.opts.Now()
		res, err := call(context.Background(), g.p, g.p.opts.Client.PricingNodePrice, &protos.PricingNodePriceRequest{
			Node: grpcNode(node), StartTimestamp: timestamppb.New(start), EndTimestamp: timestamppb.New(start.Add(time.Hour)),
		})
		a.perHour, a.err = res.GetPrice(), mapError("PricingNodePrice", g.id, err)
	}
	g.mu.Lock()
	g.price = a
	g.mu.Unlock()
	return a.perHour, a.err
}
