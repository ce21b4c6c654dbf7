// Templates copied from member nodes: which node, and for how long a
// copy serves once no node is fit to copy (CA's node info cache).

package clusterapi

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/simulator/taints"
)

// templateStabilization is how long a node must have been Ready before
// its group's template is copied from it, as in CA: a node just turned
// Ready may not run its device drivers yet, nor have published its
// ResourceSlices.
const templateStabilization = time.Minute

// copiedTemplate is a member node's template and when it was copied.
type copiedTemplate struct {
	node   *capi.NodeCopy
	copied time.Time
}

// nodeToCopy is the member node a group's template is copied from, in
// CA's order: a node fit to copy now; else the last one copied, until
// --node-info-cache-expire-time; else, when the annotations and the
// infrastructure template describe no node either, any node of the
// group, however unready (logged: its devices may not be published yet).
func (p *Provider) nodeToCopy(ctx context.Context, res capi.Resource, instances []MachineInstance, nodes map[string]*v1.Node) (*capi.NodeCopy, error) {
	now := p.opts.Now()
	for _, in := range instances {
		if n := nodes[in.ProviderID]; n != nil && FitToCopy(n, p.opts.Taints, now) {
			copyOf, err := p.copyNode(ctx, res, n)
			if err != nil {
				return nil, err
			}
			p.copied[res.ID()] = copiedTemplate{node: copyOf, copied: now}
			return copyOf, nil
		}
	}
	if c, ok := p.copied[res.ID()]; ok {
		if now.Sub(c.copied) < p.opts.TemplateCacheExpiry {
			return c.node, nil
		}
		delete(p.copied, res.ID())
	}
	if described, err := res.TemplateNode(); err != nil || described != nil {
		return nil, nil // Build uses the description, or reports its error
	}
	for _, in := range instances {
		if n := nodes[in.ProviderID]; n != nil {
			klog.FromContext(ctx).Info("Template copied from a node not fit to copy (unready, new, held back or unschedulable): no other node and no scale-from-zero annotations",
				"object", res.ID(), "node", n.Name)
			return p.copyNode(ctx, res, n)
		}
	}
	return nil, nil
}

// copyNode is node n with its ResourceSlices, as a template copies them.
func (p *Provider) copyNode(ctx context.Context, res capi.Resource, n *v1.Node) (*capi.NodeCopy, error) {
	ptrs, err := apinodes.NodeSlices(ctx, p.opts.Slices, p.opts.Workload, n.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: slices of node %s: %w", res, n.Name, err)
	}
	return &capi.NodeCopy{Node: n, Slices: capi.SliceSpecs(ptrs), Taints: p.opts.Taints}, nil
}

// FitToCopy says whether a new node of n's group will look like n, as
// CA chooses a template node: Ready for a minute, schedulable, not held back by a startup or condition
// taint (a GPU driver still starting may not advertise its devices yet)
// and not on its way out.
func FitToCopy(n *v1.Node, tc taints.Config, now time.Time) bool {
	if !readyFor(n, templateStabilization, now) || n.DeletionTimestamp != nil || n.Spec.Unschedulable || tc.HoldsBack(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == taints.ToBeDeleted {
			return false
		}
	}
	return true
}

// readyFor says whether n has been Ready for longer than d.
func readyFor(n *v1.Node, d time.Duration, now time.Time) bool {
	_, c := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	return c != nil && c.Status == v1.ConditionTrue && c.LastTransitionTime.Add(d).Before(now)
}
