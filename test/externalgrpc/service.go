// Package externalgrpc is a provider service for tests: it serves CA's
// externalgrpc CloudProvider protocol on 127.0.0.1 over any draxr
// provider (the local provider: Node objects and ResourceSlices created
// in the API server), as CA's example service serves its in-tree
// providers, with faults injected per method. It is test code: no
// shipped binary links it.
package externalgrpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
)

// Options shape the service.
type Options struct {
	// GPULabel is GPULabel's answer.
	GPULabel string
	// NoResourceSlices makes the service an old one: its template answers
	// leave out resourceSlices (field 3), as CA's own service does.
	NoResourceSlices bool
	// NoTemplate makes NodeGroupTemplateNodeInfo Unimplemented.
	NoTemplate bool
}

// Service serves p over the protocol.
type Service struct {
	protos.UnimplementedCloudProviderServer
	p    cloudprovider.Provider
	opts Options

	mu     sync.Mutex
	faults map[string]error
	calls  map[string]int
}

// New returns a service over p.
func New(p cloudprovider.Provider, opts Options) *Service {
	return &Service{p: p, opts: opts, faults: map[string]error{}, calls: map[string]int{}}
}

// SetFault makes every call of method (e.g. "NodeGroupIncreaseSize")
// fail with err (a status error, e.g. status.Error(codes.ResourceExhausted,
// ...)) until cleared with nil.
func (s *Service) SetFault(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.faults, method)
		return
	}
	s.faults[method] = err
}

// Calls is how many times method was called, faulted calls included.
func (s *Service) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// intercept counts calls and injects faults.
func (s *Service) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:]
	s.mu.Lock()
	s.calls[method]++
	err := s.faults[method]
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Start serves on 127.0.0.1 (creds nil: plaintext) until stop, which
// waits for the server to end.
func (s *Service) Start(creds credentials.TransportCredentials) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(s.intercept)}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	protos.RegisterCloudProviderServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return lis.Addr().String(), func() { srv.Stop(); <-done }, nil
}

// toStatus is how a provider service reports a provider error: out of
// resources as ResourceExhausted, not implemented as Unimplemented, the
// rest as Unknown with the message (CA's example service's way).
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cloudprovider.ErrNotImplemented):
		return status.Error(codes.Unimplemented, err.Error())
	case cloudprovider.IsOutOfResources(err):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

func (s *Service) group(id string) (cloudprovider.NodeGroup, error) {
	for _, g := range s.p.NodeGroups() {
		if g.Id() == id {
			return g, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "node group %q not found", id)
}

func node(n *protos.ExternalGrpcNode) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.GetName(), Labels: n.GetLabels(), Annotations: n.GetAnnotations()},
		Spec: v1.NodeSpec{ProviderID: n.GetProviderID()}}
}

func pbGroup(g cloudprovider.NodeGroup) *protos.NodeGroup {
	return &protos.NodeGroup{Id: g.Id(), MinSize: int32(g.MinSize()), MaxSize: int32(g.MaxSize())}
}

// NodeGroups lists the provider's groups.
func (s *Service) NodeGroups(context.Context, *protos.NodeGroupsRequest) (*protos.NodeGroupsResponse, error) {
	res := &protos.NodeGroupsResponse{}
	for _, g := range s.p.NodeGroups() {
		res.NodeGroups = append(res.NodeGroups, pbGroup(g))
	}
	return res, nil
}

// NodeGroupForNode answers an empty group for a node of none.
func (s *Service) NodeGroupForNode(_ context.Context, req *protos.NodeGroupForNodeRequest) (*protos.NodeGroupForNodeResponse, error) {
	g, err := s.p.NodeGroupForNode(node(req.GetNode()))
	if err != nil {
		return nil, toStatus(err)
	}
	if g == nil {
		return &protos.NodeGroupForNodeResponse{NodeGroup: &protos.NodeGroup{}}, nil
	}
	return &protos.NodeGroupForNodeResponse{NodeGroup: pbGroup(g)}, nil
}

// PricingNodePrice is the price of the node's group (by the group label
// the template node carries) for the hours asked: the local provider's
// spec.price per hour, Unimplemented for a group without one.
func (s *Service) PricingNodePrice(_ context.Context, req *protos.PricingNodePriceRequest) (*protos.PricingNodePriceResponse, error) {
	g, err := s.p.NodeGroupForNode(node(req.GetNode()))
	if err != nil {
		return nil, toStatus(err)
	}
	if g == nil {
		return nil, status.Errorf(codes.NotFound, "node %s is in no node group", req.GetNode().GetName())
	}
	perHour, err := cloudprovider.NodePrice(g)
	if err != nil {
		return nil, toStatus(err)
	}
	hours := req.GetEndTimestamp().AsTime().Sub(req.GetStartTimestamp().AsTime()).Hours()
	return &protos.PricingNodePriceResponse{Price: perHour * hours}, nil
}

// GPULabel answers Options.GPULabel.
func (s *Service) GPULabel(context.Context, *protos.GPULabelRequest) (*protos.GPULabelResponse, error) {
	return &protos.GPULabelResponse{Label: s.opts.GPULabel}, nil
}

// GetAvailableGPUTypes knows none.
func (s *Service) GetAvailableGPUTypes(context.Context, *protos.GetAvailableGPUTypesRequest) (*protos.GetAvailableGPUTypesResponse, error) {
	return &protos.GetAvailableGPUTypesResponse{}, nil
}

// Cleanup has nothing to release.
func (s *Service) Cleanup(context.Context, *protos.CleanupRequest) (*protos.CleanupResponse, error) {
	return &protos.CleanupResponse{}, nil
}

// Refresh refreshes the provider.
func (s *Service) Refresh(ctx context.Context, _ *protos.RefreshRequest) (*protos.RefreshResponse, error) {
	return &protos.RefreshResponse{}, toStatus(s.p.Refresh(ctx))
}

// NodeGroupTargetSize is the group's target.
func (s *Service) NodeGroupTargetSize(_ context.Context, req *protos.NodeGroupTargetSizeRequest) (*protos.NodeGroupTargetSizeResponse, error) {
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	n, err := g.TargetSize()
	if err != nil {
		return nil, toStatus(err)
	}
	return &protos.NodeGroupTargetSizeResponse{TargetSize: int32(n)}, nil
}

// NodeGroupIncreaseSize grows the group.
func (s *Service) NodeGroupIncreaseSize(ctx context.Context, req *protos.NodeGroupIncreaseSizeRequest) (*protos.NodeGroupIncreaseSizeResponse, error) {
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	return &protos.NodeGroupIncreaseSizeResponse{}, toStatus(g.IncreaseSize(ctx, int(req.GetDelta())))
}

// NodeGroupDeleteNodes removes the nodes.
func (s *Service) NodeGroupDeleteNodes(ctx context.Context, req *protos.NodeGroupDeleteNodesRequest) (*protos.NodeGroupDeleteNodesResponse, error) {
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	var nodes []*v1.Node
	for _, n := range req.GetNodes() {
		nodes = append(nodes, node(n))
	}
	return &protos.NodeGroupDeleteNodesResponse{}, toStatus(g.DeleteNodes(ctx, nodes))
}

// NodeGroupDecreaseTargetSize gives up unregistered nodes.
func (s *Service) NodeGroupDecreaseTargetSize(ctx context.Context, req *protos.NodeGroupDecreaseTargetSizeRequest) (*protos.NodeGroupDecreaseTargetSizeResponse, error) {
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	return &protos.NodeGroupDecreaseTargetSizeResponse{}, toStatus(g.DecreaseTargetSize(ctx, int(req.GetDelta())))
}

// NodeGroupNodes lists the instances with their status.
func (s *Service) NodeGroupNodes(_ context.Context, req *protos.NodeGroupNodesRequest) (*protos.NodeGroupNodesResponse, error) {
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	in, err := g.Nodes()
	if err != nil {
		return nil, toStatus(err)
	}
	res := &protos.NodeGroupNodesResponse{}
	for _, i := range in {
		pi := &protos.Instance{Id: i.ProviderID}
		if st := i.Status; st != nil {
			pi.Status = &protos.InstanceStatus{InstanceState: protos.InstanceStatus_InstanceState(st.State)}
			if e := st.ErrorInfo; e != nil {
				pi.Status.ErrorInfo = &protos.InstanceErrorInfo{ErrorCode: e.ErrorCode, ErrorMessage: e.ErrorMessage,
					InstanceErrorClass: int32(e.ErrorClass)}
			}
		}
		res.Instances = append(res.Instances, pi)
	}
	return res, nil
}

// NodeGroupTemplateNodeInfo sends the group's template node and, unless
// the service is an old one, its slices.
func (s *Service) NodeGroupTemplateNodeInfo(_ context.Context, req *protos.NodeGroupTemplateNodeInfoRequest) (*protos.NodeGroupTemplateNodeInfoResponse, error) {
	if s.opts.NoTemplate {
		return nil, status.Error(codes.Unimplemented, "no templates")
	}
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	n, slices, err := g.TemplateNodeInfo()
	if err != nil {
		return nil, toStatus(err)
	}
	b, err := n.Marshal()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	res := &protos.NodeGroupTemplateNodeInfoResponse{NodeBytes: b}
	if s.opts.NoResourceSlices {
		return res, nil
	}
	for _, sl := range slices {
		b, err := sl.Marshal()
		if err != nil {
			return nil, status.Error(codes.Internal, fmt.Sprintf("slice %s: %v", sl.Name, err))
		}
		res.ResourceSlices = append(res.ResourceSlices, b)
	}
	return res, nil
}

// NodeGroupGetOptions answers the group's options over the defaults.
func (s *Service) NodeGroupGetOptions(_ context.Context, req *protos.NodeGroupAutoscalingOptionsRequest) (*protos.NodeGroupAutoscalingOptionsResponse, error) {
	g, err := s.group(req.GetId())
	if err != nil {
		return nil, err
	}
	d := req.GetDefaults()
	o, err := g.GetOptions(cloudprovider.NodeGroupOptions{
		ScaleDownUtilizationThreshold:    d.GetScaleDownUtilizationThreshold(),
		ScaleDownGpuUtilizationThreshold: d.GetScaleDownGpuUtilizationThreshold(),
		ScaleDownUnneededTime:            d.GetScaleDownUnneededDuration().AsDuration(),
		ScaleDownUnreadyTime:             d.GetScaleDownUnreadyDuration().AsDuration(),
		MaxNodeProvisionTime:             d.GetMaxNodeProvisionDuration().AsDuration(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	if o == nil {
		return &protos.NodeGroupAutoscalingOptionsResponse{}, nil
	}
	return &protos.NodeGroupAutoscalingOptionsResponse{NodeGroupAutoscalingOptions: &protos.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    o.ScaleDownUtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: o.ScaleDownGpuUtilizationThreshold,
		ScaleDownUnneededDuration:        durationpb.New(o.ScaleDownUnneededTime),
		ScaleDownUnreadyDuration:         durationpb.New(o.ScaleDownUnreadyTime),
		MaxNodeProvisionDuration:         durationpb.New(o.MaxNodeProvisionTime),
	}}, nil
}
