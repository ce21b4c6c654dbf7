package clusterstate

import (
	"fmt"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
)

// AddProviderGroups adds a provider's node groups to objects read from a
// dump or a cluster, as the loop sees them (the same PlanningGroup,
// AsMember and UpcomingNodes): each group's template, its members (the
// nodes the provider maps to it, by providerID for Cluster API) counted
// toward its size, and stand-ins for the nodes its target size counts
// that have not registered; and each group's price, when the provider
// gives one (a one-off read, so always asked). An error is one node's or
// group's; the others are added regardless.
func AddProviderGroups(provider cloudprovider.Provider, objs *input.Objects) []error {
	var errs []error
	groups := provider.NodeGroups()
	ids := make([]string, len(groups))
	for i, ng := range groups {
		ids[i] = ng.Id()
	}
	prefixes := nodegroup.NodeNamePrefixes(ids)
	registered := map[string]int{}
	for i, n := range objs.Nodes {
		ng, err := provider.NodeGroupForNode(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: node group: %w", n.Name, err))
			continue
		}
		if ng != nil {
			objs.Nodes[i] = AsMember(n, ng.Id())
			registered[ng.Id()]++
		}
	}
	for _, ng := range groups {
		g, err := PlanningGroup(ng)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := withPrice(g, ng); err != nil {
			errs = append(errs, err)
		}
		target, err := ng.TargetSize()
		if err != nil {
			errs = append(errs, fmt.Errorf("node group %s: target size: %w", ng.Id(), err))
			continue
		}
		nodes, slices := UpcomingNodes(g, prefixes[ng.Id()], registered[ng.Id()], target)
		objs.Nodes = append(objs.Nodes, nodes...)
		objs.ResourceSlices = append(objs.ResourceSlices, slices...)
		objs.NodeGroups = append(objs.NodeGroups, g)
	}
	return errs
}
