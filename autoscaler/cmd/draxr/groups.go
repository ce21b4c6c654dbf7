package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/restmapper"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// providerFlags say where node groups come from, with draxr-autoscaler's
// flags, so that a plan is made from the groups the autoscaler would see.
type providerFlags struct {
	cloudProvider string
	autoDiscovery []string
}

const providerLocal = "local"

func (f *providerFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.cloudProvider, "cloud-provider", "",
		"where node groups come from, as draxr-autoscaler's flag: local (NodeGroup objects) or clusterapi "+
			"(MachineDeployments, MachineSets, MachinePools, read by the autoscaler's clusterapi provider); "+
			"empty: NodeGroups, and clusterapi when the input holds Cluster API objects or the cluster serves them")
	fs.StringArrayVar(&f.autoDiscovery, "node-group-auto-discovery", nil,
		"clusterapi: which scalable resources are node groups, as draxr-autoscaler takes it "+
			"(clusterapi:namespace=NS,clusterName=NAME,LABEL=VALUE; repeatable)")
}

func (f *providerFlags) check() error {
	switch f.cloudProvider {
	case "", providerLocal, clusterapi.Name:
	default:
		return fmt.Errorf("--cloud-provider: unknown provider %q (want %s or %s)", f.cloudProvider, providerLocal, clusterapi.Name)
	}
	if len(f.autoDiscovery) > 0 && f.cloudProvider == providerLocal {
		return fmt.Errorf("--node-group-auto-discovery is for --cloud-provider=%s", clusterapi.Name)
	}
	if _, err := clusterapi.ParseAutoDiscovery(f.autoDiscovery); err != nil {
		return fmt.Errorf("--node-group-auto-discovery: %w", err)
	}
	return nil
}

// dumpGroups plans a dump's Cluster API groups through the clusterapi
// provider running over the dump: members counted by providerID as the
// provider maps them, templates copied from the node the provider would
// copy, ConfigMaps of the dump read. A group the provider refuses is bad
// input.
func (f *providerFlags) dumpGroups(ctx context.Context, objs *input.Objects) error {
	if f.cloudProvider == providerLocal || f.cloudProvider == "" && !hasScalable(objs) {
		return nil
	}
	src, err := clusterapi.DumpSource(objs)
	if err != nil {
		return err
	}
	warnings, err := f.clusterAPIGroups(ctx, src, objs)
	if err != nil {
		return err
	}
	if len(warnings) > 0 {
		return errors.Join(warnings...)
	}
	return nil
}

// liveSource is the cluster as the clusterapi provider reads it, nil
// when its groups are not to be read: --cloud-provider=local, or left
// empty and the cluster serves no Cluster API.
func (f *providerFlags) liveSource(client kubernetes.Interface, dyn dynamic.Interface) *clusterapi.Source {
	if f.cloudProvider == providerLocal || f.cloudProvider == "" && !servesClusterAPI(client.Discovery()) {
		return nil
	}
	return &clusterapi.Source{Dynamic: dyn, Kube: client,
		Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))}
}

// liveGroups does the same over the cluster (src from liveSource); as in
// the autoscaler, a group the provider refuses is left out with a warning.
func (f *providerFlags) liveGroups(ctx context.Context, src *clusterapi.Source, objs *input.Objects, stderr io.Writer) error {
	if src == nil {
		return nil
	}
	warnings, err := f.clusterAPIGroups(ctx, *src, objs)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
	return err
}

// newClusterAPI is the clusterapi provider as draxr-autoscaler builds it
// from these flags, reading src; nodes and slices, when set, are the
// listers the autoscaler reads (else it reads src's).
func (f *providerFlags) newClusterAPI(src clusterapi.Source, nodes corelisters.NodeLister,
	slices resourcelisters.ResourceSliceLister) (*clusterapi.Provider, error) {
	return clusterapi.New(clusterapi.Options{Dynamic: src.Dynamic, Kube: src.Kube, Mapper: src.Mapper, Dump: src.Dump,
		Nodes: nodes, Slices: slices, AutoDiscovery: f.autoDiscovery, TemplateCacheExpiry: clusterapi.DefaultTemplateCacheExpiry})
}

func (f *providerFlags) clusterAPIGroups(ctx context.Context, src clusterapi.Source, objs *input.Objects) ([]error, error) {
	p, err := f.newClusterAPI(src, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := p.Refresh(ctx); err != nil {
		return nil, err
	}
	var warnings []error
	groupErrs := p.GroupErrors()
	ids := make([]string, 0, len(groupErrs))
	for id := range groupErrs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		warnings = append(warnings, fmt.Errorf("%s is not a node group: %w", id, groupErrs[id]))
	}
	return append(warnings, clusterstate.AddProviderGroups(p, objs)...), nil
}

func hasScalable(objs *input.Objects) bool {
	for _, u := range objs.ClusterAPI {
		if capi.IsScalableKind(u.GetKind()) {
			return true
		}
	}
	return false
}

// servesClusterAPI says whether the cluster serves Cluster API's
// MachineDeployments (a management cluster, or a self-managed one), at
// v1beta2 or, before Cluster API 1.11, v1beta1.
func servesClusterAPI(d discovery.DiscoveryInterface) bool {
	for _, version := range capi.Versions() {
		gvr := schema.GroupVersionResource{Group: capi.Group, Version: version, Resource: strings.ToLower(capi.MachineDeployment) + "s"}
		if liveview.CheckServed(d, gvr) == nil {
			return true
		}
	}
	return false
}
