// Package plugins carries draxr's one fix to kube-scheduler: DeviceClass to
// extended resource name resolution. The upstream DynamicResources,
// NodeResourcesFit and NodeResourcesBalancedAllocation plugins run
// unchanged, but the framework handle they are built with answers
// DeviceClassResolver() with draxr's index (scheduler/classes), which keeps
// every class's implicit name and restores the remaining class's mapping
// when a clashing class is deleted or cleared. Upstream's cache
// (ExtendedResourceCache, unchanged in v0.37.2) depends on informer order and breaks the
// KEP's migration path.
//
// The wrapped plugins are registered under their own names (see
// scheduler/aliases; the framework refuses to replace in-tree names); the
// shipped configuration disables the upstream three and enables these.
package plugins

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/scheduler/classes"
	"draxr.dev/draxr/scheduler/devicefull"
	"draxr.dev/draxr/scheduler/kubeversion"
)

// Options registers the wrapped plugins with kube-scheduler's command.
// The plugins of all its profiles share one Resolvers. Building them
// fails, and the scheduler does not start, against an API server older
// than the Kubernetes minor draxr-scheduler is built on.
func Options() []app.Option {
	resolvers := NewResolvers()
	var server serverCheck
	var opts []app.Option
	for name, factory := range aliases.Registry(resolvers.WithResolver, &aliases.DeviceFull{MinSlices: devicefull.DefaultMinSlices}) {
		opts = append(opts, app.WithPlugin(name, server.before(factory)))
	}
	return opts
}

// serverCheck asks the API server its version once per scheduler.
type serverCheck struct {
	once sync.Once
	err  error
}

func (c *serverCheck) before(factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		if client := h.ClientSet(); client != nil {
			c.once.Do(func() {
				v, err := client.Discovery().ServerVersion()
				if err != nil {
					c.err = fmt.Errorf("draxr-scheduler: reading the API server's version: %w", err)
					return
				}
				if err := kubeversion.CheckServer(v); err != nil {
					c.err = fmt.Errorf("draxr-scheduler %s refuses to start: %w", kubeversion.Version(), err)
				}
			})
		}
		if c.err != nil {
			return nil, c.err
		}
		return factory(ctx, args, h)
	}
}

// Resolvers hands out draxr's class resolver, one per informer factory:
// the plugins of one scheduler (every profile) share its index.
type Resolvers struct {
	mu        sync.Mutex
	byFactory map[informers.SharedInformerFactory]*cycleResolver
}

// NewResolvers returns an empty set of resolvers.
func NewResolvers() *Resolvers {
	return &Resolvers{byFactory: map[informers.SharedInformerFactory]*cycleResolver{}}
}

// WithResolver returns the handle with draxr's class resolver, fed by the
// handle's DeviceClass informer.
func (rs *Resolvers) WithResolver(h fwk.Handle) fwk.Handle {
	if h.SharedDRAManager() == nil {
		return h // DRA disabled: nothing to resolve
	}
	r := rs.resolverFor(h.SharedInformerFactory(), h.SharedDRAManager().DeviceClassResolver())
	return handle{Handle: h, dra: draManager{SharedDRAManager: h.SharedDRAManager(), resolver: r}}
}

// resolverFor returns the factory's resolver, creating it on first use.
// upstream is the scheduler's own resolver.
func (rs *Resolvers) resolverFor(factory informers.SharedInformerFactory, upstream fwk.DeviceClassResolver) *cycleResolver {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.byFactory[factory]; ok {
		return r
	}
	r := &cycleResolver{index: classes.NewLocked()}
	rs.byFactory[factory] = r
	feed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setClass(r.index, obj) },
		UpdateFunc: func(_, obj any) { setClass(r.index, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*resourceapi.DeviceClass); ok {
				r.index.Delete(c.Name)
			}
		},
	}
	// kube-scheduler chains the handler that requeues pending pods on a
	// DeviceClass event behind its own extended-resource cache, so the
	// cache is updated before any pod is retried. Joining that chain
	// (plugins are built before the scheduler adds its handlers) puts
	// draxr's index first in it: a pod retried because a class changed
	// reads the changed mapping. A handler of its own on the informer
	// would run in its own goroutine, and a retry could read the old
	// mapping and never be retried again.
	if chain, ok := upstream.(*extendedresourcecache.ExtendedResourceCache); ok {
		chain.AddEventHandler(feed)
		return r
	}
	// No upstream cache (a handle built without kube-scheduler's DRA
	// manager): the factory is started after plugins are built, so this
	// handler sees every class from the initial list on.
	_, _ = factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(feed)
	return r
}

func setClass(r *classes.Locked, obj any) {
	if c, ok := obj.(*resourceapi.DeviceClass); ok {
		r.Set(c)
	}
}

// cycleResolver is the resolver the wrapped plugins read: the index's
// current mapping, pinned for the length of a scheduling cycle (see
// aliases.CycleView). Scheduling cycles run one at a time; Filter and
// Score read from parallel goroutines, and only through atomics.
type cycleResolver struct {
	index  *classes.Locked
	pinned atomic.Pointer[classes.Mapping]
}

var _ aliases.CycleView = &cycleResolver{}

// cycleMappingKey holds, in a pod's CycleState, the mapping its cycle
// read.
const cycleMappingKey fwk.StateKey = "draxr.dev/device-class-mapping"

type cycleMapping struct{ *classes.Mapping }

// Clone shares the mapping: it is immutable.
func (m cycleMapping) Clone() fwk.StateData { return m }

// GetDeviceClass implements fwk.DeviceClassResolver: the pinned mapping
// during a cycle, the current one outside (queueing hints).
func (r *cycleResolver) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	if m := r.pinned.Load(); m != nil {
		return m.GetDeviceClass(name)
	}
	return r.index.GetDeviceClass(name)
}

func (r *cycleResolver) BeginCycle(state fwk.CycleState) {
	if m := mappingOf(state); m != nil {
		r.pinned.Store(m)
		return
	}
	m := r.index.Current()
	state.Write(cycleMappingKey, cycleMapping{m})
	r.pinned.Store(m)
}

func (r *cycleResolver) EndCycle() { r.pinned.Store(nil) }

func (r *cycleResolver) Verify(state fwk.CycleState, pod *v1.Pod) *fwk.Status {
	began := mappingOf(state)
	if began == nil {
		return nil
	}
	now := r.index.Current()
	for _, name := range requestedNames(pod) {
		if c := began.GetDeviceClass(name); c != nil && now.GetDeviceClass(name) == nil {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
				"DeviceClass %s stopped backing %s during scheduling; the pod is scheduled again", c.Name, name))
		}
	}
	return nil
}

func mappingOf(state fwk.CycleState) *classes.Mapping {
	data, err := state.Read(cycleMappingKey)
	if err != nil {
		return nil
	}
	m, _ := data.(cycleMapping)
	return m.Mapping
}

// requestedNames lists the resource names the pod's containers ask for.
func requestedNames(pod *v1.Pod) []v1.ResourceName {
	var names []v1.ResourceName
	add := func(cs []v1.Container) {
		for _, c := range cs {
			for name := range c.Resources.Requests {
				names = append(names, name)
			}
			for name := range c.Resources.Limits {
				if _, ok := c.Resources.Requests[name]; !ok {
					names = append(names, name)
				}
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return names
}

// handle is the framework handle with draxr's resolver.
type handle struct {
	fwk.Handle
	dra fwk.SharedDRAManager
}

func (h handle) SharedDRAManager() fwk.SharedDRAManager { return h.dra }

type draManager struct {
	fwk.SharedDRAManager
	resolver fwk.DeviceClassResolver
}

func (m draManager) DeviceClassResolver() fwk.DeviceClassResolver { return m.resolver }
