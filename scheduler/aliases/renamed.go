package aliases

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	"draxr.dev/draxr/scheduler/devicefull"
)

// The framework requires a plugin's Name() to be the name it is
// configured under (score weights are looked up by Name()). Embedding the
// upstream plugin's concrete type keeps every extension point it
// implements; only the name changes, and the extension points that start
// and end a scheduling cycle's reads of the class mapping tell the
// resolver (see CycleView).

type renamedDynamicResources struct {
	*dynamicresources.DynamicResources
	name  string
	cycle CycleView
	// dra is set when Filter answers device-full nodes itself (see
	// devicefull), in clusters of at least minSlices slices; nil leaves
	// every node to upstream.
	dra       fwk.SharedDRAManager
	minSlices int
	slices    devicefull.SliceCache
}

func (p *renamedDynamicResources) Name() string { return p.name }

func (p *renamedDynamicResources) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.cycle.BeginCycle(state)
	result, st := p.DynamicResources.PreFilter(ctx, state, pod, nodes)
	// A state is one cycle's; dropping any earlier verdict keeps a reused
	// one from answering with it.
	state.Delete(devicefull.StateKey)
	if p.dra != nil && st.IsSuccess() {
		if d := devicefull.For(p.dra, &p.slices, state, pod, p.minSlices); d != nil {
			state.Write(devicefull.StateKey, d)
		}
	}
	return result, st
}

// Filter rejects at once a pod that needs a new device on a node whose
// devices are all taken, as upstream's allocator would after a search
// through every slice of the cluster.
func (p *renamedDynamicResources) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if data, err := state.Read(devicefull.StateKey); err == nil {
		if d, ok := data.(*devicefull.Verdict); ok && d.Rejects(nodeInfo) {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, devicefull.Reason)
		}
	}
	return p.DynamicResources.Filter(ctx, state, pod, nodeInfo)
}

// PostFilter ends a cycle in which no node fit.
func (p *renamedDynamicResources) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	defer p.cycle.EndCycle()
	return p.DynamicResources.PostFilter(ctx, state, pod, statuses)
}

// Reserve ends a cycle that chose a node: nothing after it in the
// scheduling cycle reads the mapping.
func (p *renamedDynamicResources) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	defer p.cycle.EndCycle()
	return p.DynamicResources.Reserve(ctx, state, pod, nodeName)
}

// PreBind refuses to bind a pod whose DRA-backed names stopped resolving
// after its cycle began: its claim names a class that no longer backs the
// name, so the pod is sent back to be scheduled anew.
func (p *renamedDynamicResources) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if st := p.cycle.Verify(state, pod); !st.IsSuccess() {
		return st
	}
	return p.DynamicResources.PreBind(ctx, state, pod, nodeName)
}

type renamedFit struct {
	*noderesources.Fit
	name  string
	cycle CycleView
}

func (p *renamedFit) Name() string { return p.name }

func (p *renamedFit) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.cycle.BeginCycle(state)
	return p.Fit.PreFilter(ctx, state, pod, nodes)
}

func (p *renamedFit) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	p.cycle.BeginCycle(state)
	return p.Fit.PreScore(ctx, state, pod, nodes)
}

type renamedBalancedAllocation struct {
	*noderesources.BalancedAllocation
	name  string
	cycle CycleView
}

func (p *renamedBalancedAllocation) Name() string { return p.name }

func (p *renamedBalancedAllocation) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	p.cycle.BeginCycle(state)
	return p.BalancedAllocation.PreScore(ctx, state, pod, nodes)
}

func rename(p fwk.Plugin, name string, cycle CycleView, dra fwk.SharedDRAManager, minSlices int) (fwk.Plugin, error) {
	if cycle == nil {
		cycle = noCycleView{}
	}
	switch v := p.(type) {
	case *dynamicresources.DynamicResources:
		return &renamedDynamicResources{DynamicResources: v, name: name, cycle: cycle, dra: dra, minSlices: minSlices}, nil
	case *noderesources.Fit:
		return &renamedFit{v, name, cycle}, nil
	case *noderesources.BalancedAllocation:
		return &renamedBalancedAllocation{v, name, cycle}, nil
	}
	return nil, fmt.Errorf("%s: cannot rename plugin of type %T", name, p)
}
