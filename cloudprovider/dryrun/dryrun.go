// Package dryrun wraps a provider so that nothing changes in the cloud:
// the calls that would (IncreaseSize, DecreaseTargetSize, DeleteNodes)
// are recorded and succeed, reads pass through. draxr-autoscaler
// --dry-run (shadow mode) and the planner run the real provider this way.
package dryrun

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/cloudprovider"
)

// Call is one change the provider was asked for and did not make.
type Call struct {
	Group string
	// Op is IncreaseSize, DecreaseTargetSize or DeleteNodes.
	Op    string
	Delta int
	Nodes []string
}

func (c Call) String() string {
	if c.Op == "DeleteNodes" {
		return fmt.Sprintf("%s %s %v", c.Op, c.Group, c.Nodes)
	}
	return fmt.Sprintf("%s %s %+d", c.Op, c.Group, c.Delta)
}

// Provider is a provider that changes nothing.
type Provider struct {
	cloudprovider.Provider
	mu    sync.Mutex
	calls []Call
}

// Wrap returns p changing nothing.
func Wrap(p cloudprovider.Provider) *Provider { return &Provider{Provider: p} }

// Calls returns the changes asked for since the last Calls, in order.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

func (p *Provider) record(c Call) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

// NodeGroups implements cloudprovider.Provider.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	in := p.Provider.NodeGroups()
	out := make([]cloudprovider.NodeGroup, len(in))
	for i, g := range in {
		out[i] = &group{NodeGroup: g, p: p}
	}
	return out
}

// NodeGroupForNode implements cloudprovider.Provider.
func (p *Provider) NodeGroupForNode(n *v1.Node) (cloudprovider.NodeGroup, error) {
	g, err := p.Provider.NodeGroupForNode(n)
	if err != nil || g == nil {
		return g, err
	}
	return &group{NodeGroup: g, p: p}, nil
}

// Unwrap is the provider that reads, for callers that need its own
// methods (the Cluster API provider's group errors).
func (p *Provider) Unwrap() cloudprovider.Provider { return p.Provider }

type group struct {
	cloudprovider.NodeGroup
	p *Provider
}

// NodePrice is the wrapped group's: embedding the NodeGroup interface
// does not pass on its optional Pricer.
func (g *group) NodePrice() (float64, error) { return cloudprovider.NodePrice(g.NodeGroup) }

func (g *group) IncreaseSize(_ context.Context, delta int) error {
	return g.increase("IncreaseSize", delta)
}

// AtomicIncreaseSize records the call, all or nothing as the wrapped
// provider would make it.
func (g *group) AtomicIncreaseSize(_ context.Context, delta int) error {
	return g.increase("AtomicIncreaseSize", delta)
}

// increase checks an increase as a provider would and records it.
func (g *group) increase(op string, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.Id(), delta)
	}
	if t, err := g.TargetSize(); err == nil && t+delta > g.MaxSize() {
		return cloudprovider.MaxSizeExceeded(g.Id(), t, delta, g.MaxSize())
	}
	g.p.record(Call{Group: g.Id(), Op: op, Delta: delta})
	return nil
}

func (g *group) DecreaseTargetSize(_ context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: target size decrease must be negative, got %d", g.Id(), delta)
	}
	g.p.record(Call{Group: g.Id(), Op: "DecreaseTargetSize", Delta: delta})
	return nil
}

func (g *group) DeleteNodes(_ context.Context, nodes []*v1.Node) error {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	g.p.record(Call{Group: g.Id(), Op: "DeleteNodes", Nodes: names})
	return nil
}
