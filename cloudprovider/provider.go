// Package cloudprovider is how the autoscaler changes the cluster: node
// groups that grow and shrink. Providers implement these interfaces; the
// autoscaler never talks to a cloud API directly.
package cloudprovider

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -destination=mocks/mocks.go -package=mocks draxr.dev/draxr/cloudprovider Provider,NodeGroup

// Provider lists node groups and maps nodes to them.
type Provider interface {
	// NodeGroups returns every group the autoscaler may change.
	NodeGroups() []NodeGroup
	// NodeGroupForNode returns the group of a node, or nil when the node
	// is not managed (matched by spec.providerID or the group label).
	NodeGroupForNode(node *v1.Node) (NodeGroup, error)
	// Refresh is called at the start of every loop.
	Refresh(ctx context.Context) error
}

// NodeGroup is a set of identical nodes.
type NodeGroup interface {
	Id() string
	MinSize() int
	MaxSize() int
	// TargetSize is the number of nodes the group should have, including
	// nodes asked for that have not registered yet.
	TargetSize() (int, error)
	// IncreaseSize asks for delta more nodes. A provider out of capacity
	// or quota returns an OutOfResourcesErrorClass Error.
	IncreaseSize(ctx context.Context, delta int) error
	// AtomicIncreaseSize asks for delta more nodes, all of them or none
	// (CA's NodeGroup.AtomicIncreaseSize, used for all-or-nothing
	// scale-ups such as best-effort-atomic ProvisioningRequests). A
	// provider that cannot promise it returns ErrNotImplemented; callers
	// then fall back to IncreaseSize (IncreaseAtomically), as CA's
	// executor does.
	AtomicIncreaseSize(ctx context.Context, delta int) error
	// DecreaseTargetSize gives up on -delta nodes not yet registered
	// (delta is negative, as in CA); registered nodes are never touched.
	DecreaseTargetSize(ctx context.Context, delta int) error
	// DeleteNodes removes registered nodes and shrinks the target.
	DeleteNodes(ctx context.Context, nodes []*v1.Node) error
	// Nodes lists the group's instances by provider ID, including those
	// that have not registered; an instance that failed to come up has
	// State InstanceCreating and ErrorInfo set.
	Nodes() ([]Instance, error)
	// TemplateNodeInfo is what a new node of the group looks like: the
	// Node and the ResourceSlices its DRA drivers will publish.
	TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error)
	// GetOptions returns the options this group runs with: defaults (the
	// flags) with the group's own overrides, as CA's
	// NodeGroup.GetOptions. A nil result or ErrNotImplemented means the
	// defaults apply.
	GetOptions(defaults NodeGroupOptions) (*NodeGroupOptions, error)
}

// NodeGroupOptions are the autoscaler flags a node group may override
// (CA's config.NodeGroupAutoscalingOptions, the fields draxr acts on).
type NodeGroupOptions struct {
	// ScaleDownUtilizationThreshold: nodes used below it may be removed.
	ScaleDownUtilizationThreshold float64
	// ScaleDownGpuUtilizationThreshold is the same for nodes with GPUs.
	ScaleDownGpuUtilizationThreshold float64
	// ScaleDownUnneededTime: how long a node is unneeded before removal.
	ScaleDownUnneededTime time.Duration
	// ScaleDownUnreadyTime: how long a node is unready before removal.
	ScaleDownUnreadyTime time.Duration
	// MaxNodeProvisionTime: how long a new node may take to register.
	MaxNodeProvisionTime time.Duration
	// MaxNodeStartupTime: how long a registered node may take to be Ready.
	MaxNodeStartupTime time.Duration
}

// OptionsOf returns ng's options over defaults; when the group cannot
// tell (ErrNotImplemented, nil) or fails, the defaults apply and the error
// says why, for the caller to report.
func OptionsOf(ng NodeGroup, defaults NodeGroupOptions) (NodeGroupOptions, error) {
	o, err := ng.GetOptions(defaults)
	switch {
	case errors.Is(err, ErrNotImplemented):
		return defaults, nil
	case err != nil:
		return defaults, err
	case o == nil:
		return defaults, nil
	}
	return *o, nil
}

// Instance is one node of a group as the provider knows it, registered
// with the API server or not.
type Instance struct {
	// ProviderID is what the node's spec.providerID will be (CA's Id).
	ProviderID string
	// NodeName is the Node's name once known, "" before.
	NodeName string
	// Status is nil when the provider cannot tell.
	Status *InstanceStatus
}

// ErrNotImplemented is returned by providers for optional operations.
var ErrNotImplemented = errors.New("not implemented by this cloud provider")

// IncreaseAtomically asks g for delta nodes all or none, and falls back
// to IncreaseSize when the provider cannot promise that (CA's executor
// does the same). atomic says which call was made.
func IncreaseAtomically(ctx context.Context, g NodeGroup, delta int) (atomic bool, err error) {
	err = g.AtomicIncreaseSize(ctx, delta)
	if !errors.Is(err, ErrNotImplemented) {
		return true, err
	}
	return false, g.IncreaseSize(ctx, delta)
}
