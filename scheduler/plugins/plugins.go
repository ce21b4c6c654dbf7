// Package plugins carries draxr's one fix to kube-scheduler: DeviceClass to
// extended resource name resolution. The upstream DynamicResources,
// NodeResourcesFit and NodeResourcesBalancedAllocation plugins run
// unchanged, but the framework handle they are built with answers
// DeviceClassResolver() with draxr's index (scheduler/classes), which keeps
// every class's implicit name and restores the remaining class's mapping
// when a clashing class is deleted or cleared. Upstream's cache
// (ExtendedResourceCache, v0.36.3) depends on informer order and breaks the
// KEP's migration path.
//
// The wrapped plugins are registered under their own names (see
// scheduler/aliases; the framework refuses to replace in-tree names); the
// shipped configuration disables the upstream three and enables these.
package plugins

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/scheduler/classes"
)

// Options registers the wrapped plugins with kube-scheduler's command.
// The plugins of all its profiles share one Resolvers.
func Options() []app.Option {
	resolvers := NewResolvers()
	var opts []app.Option
	for name, factory := range aliases.Registry(resolvers.WithResolver) {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}

// Resolvers hands out draxr's class resolver, one per informer factory:
// the plugins of one scheduler (every profile) share its index.
type Resolvers struct {
	mu        sync.Mutex
	byFactory map[informers.SharedInformerFactory]*classes.Locked
}

// NewResolvers returns an empty set of resolvers.
func NewResolvers() *Resolvers {
	return &Resolvers{byFactory: map[informers.SharedInformerFactory]*classes.Locked{}}
}

// WithResolver returns the handle with draxr's class resolver, fed by the
// handle's DeviceClass informer.
func (rs *Resolvers) WithResolver(h fwk.Handle) fwk.Handle {
	if h.SharedDRAManager() == nil {
		return h // DRA disabled: nothing to resolve
	}
	r := rs.resolverFor(h.SharedInformerFactory())
	return handle{Handle: h, dra: draManager{SharedDRAManager: h.SharedDRAManager(), resolver: r}}
}

func (rs *Resolvers) resolverFor(factory informers.SharedInformerFactory) *classes.Locked {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.byFactory[factory]; ok {
		return r
	}
	r := classes.NewLocked()
	rs.byFactory[factory] = r
	// The factory is started after plugins are built, so this handler sees
	// every class from the initial list on.
	_, _ = factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setClass(r, obj) },
		UpdateFunc: func(_, obj any) { setClass(r, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*resourceapi.DeviceClass); ok {
				r.Delete(c.Name)
			}
		},
	})
	return r
}

func setClass(r *classes.Locked, obj any) {
	if c, ok := obj.(*resourceapi.DeviceClass); ok {
		r.Set(c)
	}
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
