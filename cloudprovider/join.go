package cloudprovider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
)

// Join is one provider made of several (the planner's NodeGroup objects
// beside a dump's Cluster API groups): groups of all, a node's group from
// the first that knows it, every Refresh.
func Join(providers ...Provider) Provider { return joined(providers) }

type joined []Provider

func (j joined) NodeGroups() []NodeGroup {
	var out []NodeGroup
	for _, p := range j {
		out = append(out, p.NodeGroups()...)
	}
	return out
}

func (j joined) NodeGroupForNode(n *v1.Node) (NodeGroup, error) {
	var errs []error
	for _, p := range j {
		g, err := p.NodeGroupForNode(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if g != nil {
			return g, nil
		}
	}
	return nil, errors.Join(errs...)
}

func (j joined) Refresh(ctx context.Context) error {
	var errs []error
	for _, p := range j {
		errs = append(errs, p.Refresh(ctx))
	}
	return errors.Join(errs...)
}
