// Package plugins carries draxr's one fix to kube-scheduler: DeviceClass to
// extended resource name resolution. The upstream DynamicResources,
// NodeResourcesFit and NodeResourcesBalancedAllocation plugins run
// unchanged, but the framework handle they are built with answers
// DeviceClassResolver() with draxr's index (simulator/classes), which keeps
// every class's implicit name and restores the remaining class's mapping
// when a clashing class is deleted or cleared. Upstream's cache
// (ExtendedResourceCache, v0.36.3) depends on informer order and breaks the
// KEP's migration path.
//
// The wrapped plugins are registered under their own names (the framework
// refuses to replace in-tree names); the shipped configuration disables the
// upstream three and enables these.
package plugins

import (
	"context"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"draxr.dev/draxr/simulator/classes"
)

// Names of the wrapped plugins, by the upstream plugin they wrap.
var Names = map[string]string{
	names.DynamicResources:                "DraxrDynamicResources",
	names.NodeResourcesFit:                "DraxrNodeResourcesFit",
	names.NodeResourcesBalancedAllocation: "DraxrNodeResourcesBalancedAllocation",
}

// Options registers the wrapped plugins with kube-scheduler's command.
func Options() []app.Option {
	inTree := plugins.NewInTreeRegistry()
	var opts []app.Option
	for upstream, name := range Names {
		opts = append(opts, app.WithPlugin(name, Wrap(upstream, inTree[upstream])))
	}
	return opts
}

// Wrap returns a factory that builds the upstream plugin with draxr's
// class resolver in its handle, and with the upstream default arguments
// when the configuration gives none.
func Wrap(upstream string, factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		if factory == nil {
			return nil, fmt.Errorf("no in-tree plugin %s to wrap", upstream)
		}
		typed, err := pluginArgs(upstream, args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Names[upstream], err)
		}
		return factory(ctx, typed, withResolver(h, resolverFor(h.SharedInformerFactory())))
	}
}

// resolvers shares one index per informer factory (one per scheduler).
var resolvers sync.Map // informers.SharedInformerFactory -> *classes.Locked

func resolverFor(factory informers.SharedInformerFactory) *classes.Locked {
	if r, ok := resolvers.Load(factory); ok {
		return r.(*classes.Locked)
	}
	r := classes.NewLocked()
	if actual, loaded := resolvers.LoadOrStore(factory, r); loaded {
		return actual.(*classes.Locked)
	}
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

func withResolver(h fwk.Handle, r fwk.DeviceClassResolver) fwk.Handle {
	if h.SharedDRAManager() == nil {
		return h // DRA disabled: nothing to resolve
	}
	return handle{Handle: h, dra: draManager{SharedDRAManager: h.SharedDRAManager(), resolver: r}}
}
