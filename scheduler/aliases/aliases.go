// Package aliases names the upstream scheduler plugins draxr-scheduler
// runs under its own names, and builds them. Both draxr-scheduler and the
// simulator's harness register these names, so one KubeSchedulerConfiguration
// serves the scheduler, the planner and the autoscaler alike.
package aliases

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Names maps each wrapped upstream plugin to draxr's name for it.
func Names() map[string]string {
	return map[string]string{
		names.DynamicResources:                "DraxrDynamicResources",
		names.NodeResourcesFit:                "DraxrNodeResourcesFit",
		names.NodeResourcesBalancedAllocation: "DraxrNodeResourcesBalancedAllocation",
	}
}

// Registry returns factories for the draxr names. Each builds the upstream
// plugin with the upstream default args when none are configured, and
// with the handle that wrap returns (nil: the handle as given).
func Registry(wrap func(fwk.Handle) fwk.Handle) frameworkruntime.Registry {
	out := frameworkruntime.Registry{}
	for upstream, alias := range Names() {
		out[alias] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			// The in-tree factories capture the feature gates when the
			// registry is made; kube-scheduler builds this registry before
			// it parses --feature-gates, so take the factory now.
			factory := plugins.NewInTreeRegistry()[upstream]
			typed, err := pluginArgs(upstream, args)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", alias, err)
			}
			if wrap != nil {
				h = wrap(h)
			}
			p, err := factory(ctx, typed, h)
			if err != nil {
				return nil, err
			}
			return rename(p, alias)
		}
	}
	return out
}
