// Package clusterapi is the Cluster API cloud provider: node groups are
// MachineDeployments, MachineSets (not owned by a MachineDeployment) and
// MachinePools carrying the Cluster Autoscaler's size annotations. It
// scales through the scale subresource and removes a chosen node the way
// CA does: mark its Machine with cluster.x-k8s.io/delete-machine, then
// lower replicas. Templates for scale from zero come from
// simulator/nodegroup/capi, so the offline planner reads groups the same
// way; draxr adds full template ResourceSlices.
package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/apinodes"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/simulator/taints"
)

// Name is the --cloud-provider value.
const Name = "clusterapi"

// PendingProviderIDPrefix names machines that have no providerID yet.
const PendingProviderIDPrefix = "clusterapi://"

// GVR returns the resource of a CAPI kind.
func GVR(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: capi.Group, Version: capi.Version, Resource: strings.ToLower(kind) + "s"}
}

// Options configure the provider.
type Options struct {
	// Dynamic and Kube reach the management cluster: the Cluster API
	// objects, infrastructure templates and template ConfigMaps.
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	// Workload reaches the cluster the machines join (their Nodes and
	// ResourceSlices); nil when it is the management cluster, as in CA's
	// single-cluster topology.
	Workload kubernetes.Interface
	// WatchUntil, when set, has the Cluster API kinds read every loop
	// served from watches, which stop when it closes (the autoscaler);
	// without it each Refresh lists them (the CLI, tests).
	WatchUntil <-chan struct{}
	// Nodes, when set, is a synced node informer's lister of the workload
	// cluster (the autoscaler's): Refresh reads nodes from it instead of
	// listing them.
	Nodes corelisters.NodeLister
	// Slices, when set, is the workload cluster's synced ResourceSlice
	// informer's lister: templates copied from members read it.
	Slices resourcelisters.ResourceSliceLister
	// AutoDiscovery are --node-group-auto-discovery values.
	AutoDiscovery []string
	// Mapper resolves infrastructure template kinds; nil discovers them
	// through Kube.
	Mapper meta.RESTMapper
	// Dump, when set, is what the provider reads instead of the clients
	// above (DumpSource), which are then not needed; Nodes and Slices
	// default to its own.
	Dump *Dump
	Now  func() time.Time
	// Taints says which taints of a member node its group's template leaves
	// out (--startup-taint, --status-taint).
	Taints taints.Config
	// TemplateCacheExpiry is how long a template copied from a member node
	// serves its group once no node is fit to copy
	// (--node-info-cache-expire-time, DefaultTemplateCacheExpiry); 0
	// keeps no copy.
	TemplateCacheExpiry time.Duration
}

// DefaultTemplateCacheExpiry is CA's --node-info-cache-expire-time default.
const DefaultTemplateCacheExpiry = 87600 * time.Hour

// Provider implements cloudprovider.Provider.
type Provider struct {
	opts      Options
	discovery []Discovery

	mu     sync.Mutex
	groups []*group
	// byProviderID maps node provider IDs to their group.
	byProviderID map[string]*group
	// errs holds, per object that would be a group, why it is not one
	// this loop (a bad annotation); the other groups are unaffected.
	errs map[string]error
	// errObjects are the objects behind errs, for events about them.
	errObjects map[string]*v1.ObjectReference
	// copied keeps, per group, the last template copied from a node fit
	// to copy, for loops where none is (its nodes are all unready, new
	// or gone): CA's node info cache. Only Refresh uses it.
	copied map[string]copiedTemplate
	// served are the Cluster API resources at the version the management
	// cluster serves, by kind, once found.
	served map[string]schema.GroupVersionResource
	// watched serves the listed kinds from watches (Options.WatchUntil).
	watched *watched
}

var _ cloudprovider.Provider = &Provider{}

// New checks the discovery specs; Refresh reads the groups.
func New(opts Options) (*Provider, error) {
	if opts.Dump == nil && (opts.Dynamic == nil || opts.Kube == nil) {
		return nil, errors.New("clusterapi provider: a dynamic and a Kubernetes client are required, or a dump to read")
	}
	specs, err := ParseAutoDiscovery(opts.AutoDiscovery)
	if err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Workload == nil {
		opts.Workload = opts.Kube
	}
	if d := opts.Dump; d != nil {
		if opts.Nodes == nil {
			opts.Nodes = d.nodes
		}
		if opts.Slices == nil {
			opts.Slices = d.slices
		}
	} else if opts.Mapper == nil {
		opts.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(opts.Kube.Discovery()))
	}
	p := &Provider{opts: opts, discovery: specs, byProviderID: map[string]*group{}, errs: map[string]error{},
		copied: map[string]copiedTemplate{}, served: map[string]schema.GroupVersionResource{}}
	switch {
	case opts.Dump != nil:
		p.watched = &watched{dump: opts.Dump.kinds}
	case opts.WatchUntil != nil:
		p.watched = newWatched(opts.Dynamic, opts.WatchUntil, opts.Now)
	}
	return p, nil
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

// GroupErrors returns, per object ID ("MachineDeployment/ns/name"), why
// it is not a node group this loop.
func (p *Provider) GroupErrors() map[string]error {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]error, len(p.errs))
	for k, v := range p.errs {
		out[k] = v
	}
	return out
}

// GroupErrorObject returns the object behind GroupErrors' id, so that
// events about it show on that MachineDeployment/MachineSet/MachinePool.
func (p *Provider) GroupErrorObject(id string) *v1.ObjectReference {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref, ok := p.errObjects[id]; ok {
		copied := *ref
		return &copied
	}
	return nil
}

// NodeGroupForNode matches the node's provider ID to a group's Machine.
func (p *Provider) NodeGroupForNode(node *v1.Node) (cloudprovider.NodeGroup, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.byProviderID[node.Spec.ProviderID]; ok {
		return g, nil
	}
	return nil, nil
}

// Refresh reads the scalable resources, their Machines and nodes.
func (p *Provider) Refresh(ctx context.Context) error {
	ns := namespaceToWatch(p.discovery)
	machines, err := p.list(ctx, capi.Machine, ns)
	if err != nil {
		return err
	}
	nodeByProviderID, err := apinodes.ByProviderID(ctx, p.opts.Nodes, p.opts.Workload)
	if err != nil {
		return fmt.Errorf("clusterapi provider: list nodes: %w", err)
	}
	resources, sets, err := p.listScalable(ctx, ns)
	if err != nil {
		return err
	}
	machinesOf := machinesByOwner(machines, sets)
	r := refreshed{seen: map[string]bool{}, byProviderID: map[string]*group{}, errs: map[string]error{}, errObjects: map[string]*v1.ObjectReference{}}
	for i := range resources {
		p.addGroup(ctx, &r, &resources[i], machinesOf, nodeByProviderID)
	}
	for id := range p.copied {
		if !r.seen[id] {
			delete(p.copied, id)
		}
	}
	sort.Slice(r.groups, func(i, j int) bool { return r.groups[i].Id() < r.groups[j].Id() })
	p.mu.Lock()
	p.groups, p.byProviderID, p.errs, p.errObjects = r.groups, r.byProviderID, r.errs, r.errObjects
	p.mu.Unlock()
	return nil
}

// listScalable lists the kinds that may be groups, and the MachineSets
// among them apart: a MachineDeployment's machines are those of its
// MachineSets.
func (p *Provider) listScalable(ctx context.Context, ns string) (resources, sets []unstructured.Unstructured, err error) {
	for _, kind := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool} {
		items, err := p.list(ctx, kind, ns)
		if err != nil {
			return nil, nil, err
		}
		if kind == capi.MachineSet {
			sets = items
		}
		resources = append(resources, items...)
	}
	return resources, sets, nil
}

// refreshed is what one Refresh reads: the groups, and why the objects
// that are not groups this loop are not.
type refreshed struct {
	groups       []*group
	seen         map[string]bool // group IDs read, fit or not
	byProviderID map[string]*group
	errs         map[string]error
	errObjects   map[string]*v1.ObjectReference
}

// addGroup reads scalable resource u as a group into r, or records why it
// is not one; a MachineSet of a MachineDeployment is not, nor an object
// the discovery specs leave out.
func (p *Provider) addGroup(ctx context.Context, r *refreshed, u *unstructured.Unstructured,
	machinesOf map[string][]*unstructured.Unstructured, nodeByProviderID map[string]*v1.Node) {
	res, err := capi.FromUnstructured(u)
	if err != nil {
		r.errs[kindID(u)], r.errObjects[kindID(u)] = err, objectRef(u)
		return
	}
	if !allows(p.discovery, res) {
		return
	}
	if res.Kind == capi.MachineSet && res.OwnedByMachineDeployment {
		return // its MachineDeployment is the group
	}
	res.Infra = p.infraStatus(ctx, res)
	g := &group{p: p, res: res, gvr: p.resource(res.Kind)}
	g.instances = p.instances(machinesOf[res.ID()], nodeByProviderID)
	if res.Kind == capi.MachinePool && len(g.instances) == 0 {
		// A MachinePool whose provider keeps no Machine objects lists
		// its instances in spec.providerIDList (as CA reads them).
		g.instances = poolInstances(u, nodeByProviderID)
	}
	r.seen[res.ID()] = true
	built, err := p.build(ctx, res, g.instances, nodeByProviderID)
	if err != nil {
		r.errs[res.ID()], r.errObjects[res.ID()] = err, objectRef(u)
		klog.FromContext(ctx).Error(err, "Not a node group this loop", "object", res.ID())
		return
	}
	if built == nil {
		return
	}
	g.built = built
	r.groups = append(r.groups, g)
	for _, in := range g.instances {
		r.byProviderID[in.ProviderID] = g
	}
}

func kindID(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func objectRef(u *unstructured.Unstructured) *v1.ObjectReference {
	apiVersion := u.GetAPIVersion()
	if apiVersion == "" {
		apiVersion = capi.APIVersion
	}
	return &v1.ObjectReference{APIVersion: apiVersion, Kind: u.GetKind(), Namespace: u.GetNamespace(),
		Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
}

// infraStatus reads the group's infrastructure template's scale-from-zero
// status (CAPI's opt-in status.capacity, status.nodeInfo). A template that
// cannot be read only leaves the hints out, as in CA: the annotations or
// a member node may still describe the group; the reason is logged.
func (p *Provider) infraStatus(ctx context.Context, res capi.Resource) capi.InfraStatus {
	ref := res.InfraRef
	if ref == nil {
		return capi.InfraStatus{}
	}
	logger := klog.FromContext(ctx).WithValues("object", res.ID(), "infrastructureRef", ref.Kind+"/"+ref.Name)
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	var u *unstructured.Unstructured
	if d := p.opts.Dump; d != nil {
		var err error
		if u, err = d.infraObject(gk, res.Namespace, ref.Name); err != nil {
			logger.V(2).Info("Infrastructure template not read; its status.capacity is left out", "err", err)
			return capi.InfraStatus{}
		}
	} else {
		mapping, err := p.opts.Mapper.RESTMapping(gk)
		if err != nil {
			if r, ok := p.opts.Mapper.(meta.ResettableRESTMapper); ok {
				r.Reset() // a CRD installed since: found next loop
			}
			logger.V(2).Info("Infrastructure template kind unknown; its status.capacity is not read", "err", err)
			return capi.InfraStatus{}
		}
		var watched bool
		if p.watched != nil {
			u, watched = p.watched.template(mapping.Resource, res.Namespace, ref.Name)
		}
		if watched && u.GetKind() == "" { // a watch's objects may carry none; errors name it
			u = u.DeepCopy()
			u.SetKind(ref.Kind)
		}
		if !watched {
			u, err = p.opts.Dynamic.Resource(mapping.Resource).Namespace(res.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if err != nil {
			logger.V(2).Info("Infrastructure template not read; its status.capacity is left out", "err", err)
			return capi.InfraStatus{}
		}
	}
	st, err := capi.ReadInfraStatus(u)
	if err != nil {
		logger.Error(err, "Infrastructure template status left out")
		return capi.InfraStatus{}
	}
	return st
}

// resource is kind's resource at the version the management cluster
// serves (found by list): v1beta2 (Cluster API 1.11 and later) or, on
// older management clusters, v1beta1. What the provider reads and writes
// (replicas, the scale subresource, annotations, providerIDs,
// nodeRef.name, the infrastructure reference in either shape) is the same
// in both.
func (p *Provider) resource(kind string) schema.GroupVersionResource {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gvr, ok := p.served[kind]; ok {
		return gvr
	}
	return GVR(kind)
}

// list returns all objects of kind; a kind whose CRD is not installed
// (MachinePool is optional in CAPI) has none.
func (p *Provider) list(ctx context.Context, kind, ns string) ([]unstructured.Unstructured, error) {
	if p.watched != nil {
		if items, ok, err := p.watched.list(ctx, kind, ns); ok || err != nil {
			return items, err
		}
	}
	for _, version := range capi.Versions() {
		gvr := GVR(kind)
		gvr.Version = version
		list, err := p.opts.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // not served at this version (or at all)
		}
		if err != nil {
			return nil, fmt.Errorf("clusterapi provider: list %ss: %w", kind, err)
		}
		p.mu.Lock()
		p.served[kind] = gvr
		p.mu.Unlock()
		for i := range list.Items {
			list.Items[i].SetKind(kind) // lists may leave items' kind empty
		}
		if p.watched != nil {
			p.watched.served(kind, ns, gvr)
		}
		return list.Items, nil
	}
	if p.watched != nil {
		p.watched.notServed(kind, ns)
	}
	return nil, nil
}

// build reads the group with its ConfigMap and, when nodeToCopy finds
// one, a member node and its slices as the template.
func (p *Provider) build(ctx context.Context, res capi.Resource, instances []MachineInstance, nodes map[string]*v1.Node) (*capi.NodeGroup, error) {
	var cmData map[string]string
	if ns, name, ok, err := res.ConfigMapRef(); err != nil {
		return nil, err
	} else if ok && res.Annotations[capi.TemplateSlicesAnnotation] == "" {
		cm, err := p.configMap(ctx, ns, name)
		if err != nil {
			return nil, &capi.AnnotationError{Object: res.String(), Annotation: capi.TemplateSlicesConfigMapAnnotation,
				Err: fmt.Errorf("ConfigMap %s/%s: %w", ns, name, err)}
		}
		cmData = cm.Data
		if cmData == nil {
			cmData = map[string]string{}
		}
	}
	copyOf, err := p.nodeToCopy(ctx, res, instances, nodes)
	if err != nil {
		return nil, err
	}
	return capi.Build(res, cmData, copyOf)
}

// configMap reads a template ConfigMap from the dump, else from the
// management cluster.
func (p *Provider) configMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	if d := p.opts.Dump; d != nil {
		return d.configMap(ns, name)
	}
	return p.opts.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

type group struct {
	p         *Provider
	res       capi.Resource
	gvr       schema.GroupVersionResource
	built     *capi.NodeGroup
	instances []MachineInstance
}

func (g *group) Id() string   { return g.res.ID() }
func (g *group) MinSize() int { return g.built.Planning.Spec.MinSize }
func (g *group) MaxSize() int { return g.built.Planning.Spec.MaxSize }

// GetOptions is defaults with the group's autoscaling-options-* overrides.
func (g *group) GetOptions(defaults cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
	o := defaults.WithOverrides(g.built.Options)
	return &o, nil
}

// NodePrice is the group's draxr.dev/node-price-per-hour annotation
// (cloudprovider.Pricer); ErrNotImplemented without one.
func (g *group) NodePrice() (float64, error) { return cloudprovider.SpecPrice(g.built.Planning) }

// Planning is the group as the planner's NodeGroup.
func (g *group) Planning() *nodegroup.NodeGroup { return g.built.Planning }

// TargetSize is spec.replicas as of the last Refresh.
func (g *group) TargetSize() (int, error) {
	if g.res.Replicas == nil {
		return 0, fmt.Errorf("%s: spec.replicas is unset", g.res)
	}
	return int(*g.res.Replicas), nil
}

// Machines lists the group's Machines with their states.
func (g *group) Machines() []MachineInstance { return append([]MachineInstance(nil), g.instances...) }

func (g *group) IncreaseSize(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.Id(), delta)
	}
	return g.scale(ctx, func(replicas int) (int, error) {
		if replicas+delta > g.MaxSize() {
			return 0, cloudprovider.MaxSizeExceeded(g.Id(), replicas, delta, g.MaxSize())
		}
		return replicas + delta, nil
	})
}

// AtomicIncreaseSize is IncreaseSize: one write of spec.replicas through
// the scale subresource asks for all delta machines at once, so the API
// never holds part of the increase. What the infrastructure provider
// then creates is up to it (docs/provisioning-requests.md).
func (g *group) AtomicIncreaseSize(ctx context.Context, delta int) error {
	return g.IncreaseSize(ctx, delta)
}

// DecreaseTargetSize gives up on -delta machines that have no node yet;
// delta is negative, as the NodeGroup contract (and CA's) has it.
func (g *group) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: size decrease must be negative, got %d", g.Id(), delta)
	}
	delta = -delta
	registered := 0
	for _, in := range g.instances {
		if in.NodeName != "" {
			registered++
		}
	}
	return g.scale(ctx, func(replicas int) (int, error) {
		if replicas-delta < registered {
			return 0, fmt.Errorf("node group %s: decreasing %d by %d would remove registered nodes (%d); use DeleteNodes", g.Id(), replicas, delta, registered)
		}
		return replicas - delta, nil
	})
}

// freshReplicas reads spec.replicas from the API server, not the cache.
func (g *group) freshReplicas(ctx context.Context) (int, error) {
	if err := g.p.writable(g.Id()); err != nil {
		return 0, err
	}
	s, err := g.p.opts.Dynamic.Resource(g.gvr).Namespace(g.res.Namespace).Get(ctx, g.res.Name, metav1.GetOptions{}, "scale")
	if err != nil {
		return 0, fmt.Errorf("node group %s: get scale: %w", g.Id(), err)
	}
	replicas, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
	return int(replicas), nil
}

// scale reads and writes spec.replicas through the scale subresource,
// retrying on a conflict with a fresh read.
func (g *group) scale(ctx context.Context, next func(replicas int) (int, error)) error {
	if err := g.p.writable(g.Id()); err != nil {
		return err
	}
	client := g.p.opts.Dynamic.Resource(g.gvr).Namespace(g.res.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := client.Get(ctx, g.res.Name, metav1.GetOptions{}, "scale")
		if err != nil {
			return fmt.Errorf("node group %s: get scale: %w", g.Id(), err)
		}
		replicas, _, _ := unstructured.NestedInt64(s.Object, "spec", "replicas")
		want, err := next(int(replicas))
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(s.Object, int64(want), "spec", "replicas"); err != nil {
			return err
		}
		if _, err := client.Update(ctx, s, metav1.UpdateOptions{}, "scale"); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("node group %s: set replicas to %d: %w", g.Id(), want, err)
		}
		g.res.Replicas = ptrInt64(int64(want))
		return nil
	})
}

func ptrInt64(v int64) *int64 { return &v }

// writable refuses a write when the provider reads a dump: there is no
// API server to write to (draxr simulate only plans, or runs in dry run).
func (p *Provider) writable(what string) error {
	if p.opts.Dump != nil {
		return fmt.Errorf("%s: the clusterapi provider reads a dump and writes nothing", what)
	}
	return nil
}

// DeleteNodes marks each node's Machine for deletion and lowers replicas
// by their number, never below the min size. The marks are undone when
// the replicas cannot be lowered, so CAPI does not delete those machines
// on a later, unrelated scale-down.
func (g *group) DeleteNodes(ctx context.Context, nodes []*v1.Node) error {
	var machines []string
	for _, n := range nodes {
		m := ""
		for _, in := range g.instances {
			if n.Spec.ProviderID != "" && in.ProviderID == n.Spec.ProviderID {
				m = in.Machine
			}
		}
		if m == "" {
			for _, in := range g.instances {
				if n.Spec.ProviderID != "" && in.ProviderID == n.Spec.ProviderID {
					// Lowering replicas would let the provider pick which
					// instance goes, not necessarily this node.
					return fmt.Errorf("node group %s: node %s has no Machine (a MachinePool without Machine objects): "+
						"a chosen node can only be removed through its Machine's %s", g.Id(), n.Name, capi.DeleteMachineAnnotation)
				}
			}
			return fmt.Errorf("node group %s: node %s (providerID %q) is not one of its machines", g.Id(), n.Name, n.Spec.ProviderID)
		}
		machines = append(machines, m)
	}
	// Checked on a fresh read before any mark: the loop's view of replicas
	// may lag a removal it made a moment ago, and a machine marked on a
	// stale view would carry the mark (and be CAPI's first pick) until the
	// failed scale-down undoes it.
	target, err := g.freshReplicas(ctx)
	if err != nil {
		return err
	}
	if target-len(nodes) < g.MinSize() {
		return fmt.Errorf("node group %s: deleting %d of %d nodes goes below min size %d", g.Id(), len(nodes), target, g.MinSize())
	}
	var marked []string
	for _, m := range machines {
		if err := g.markMachine(ctx, m, true); err != nil {
			g.unmark(ctx, marked)
			return err
		}
		marked = append(marked, m)
	}
	err = g.scale(ctx, func(replicas int) (int, error) {
		if replicas-len(nodes) < g.MinSize() {
			return 0, fmt.Errorf("node group %s: deleting %d of %d nodes goes below min size %d", g.Id(), len(nodes), replicas, g.MinSize())
		}
		return replicas - len(nodes), nil
	})
	if err != nil {
		g.unmark(ctx, marked)
		return err
	}
	return nil
}

func (g *group) unmark(ctx context.Context, machines []string) {
	for _, m := range machines {
		if err := g.markMachine(ctx, m, false); err != nil {
			klog.FromContext(ctx).Error(err, "Could not remove the delete mark", "machine", m)
		}
	}
}

// markMachine sets (or removes) the delete-machine annotation, with the
// time as value as CA writes it.
func (g *group) markMachine(ctx context.Context, key string, mark bool) error {
	if err := g.p.writable("machine " + key); err != nil {
		return err
	}
	ns, name, _ := strings.Cut(key, "/")
	client := g.p.opts.Dynamic.Resource(g.p.resource(capi.Machine)).Namespace(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("machine %s: %w", key, err)
		}
		ann := m.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if mark {
			ann[capi.DeleteMachineAnnotation] = g.p.opts.Now().String()
		} else {
			delete(ann, capi.DeleteMachineAnnotation)
		}
		m.SetAnnotations(ann)
		if _, err := client.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("machine %s: mark for deletion: %w", key, err)
		}
		return nil
	})
}

// Nodes lists the group's Machines; one without a node is Creating.
func (g *group) Nodes() ([]cloudprovider.Instance, error) {
	out := make([]cloudprovider.Instance, len(g.instances))
	for i, in := range g.instances {
		out[i] = in.Instance
	}
	return out, nil
}

// TemplateNodeInfo instantiates the group's template as a node.
func (g *group) TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error) {
	node, slices := g.built.Planning.NewNode("template-" + g.res.NodeNamePrefix())
	return node, slices, nil
}
