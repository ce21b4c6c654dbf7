// Package aliases names the upstream scheduler plugins draxr-scheduler
// runs under its own names, and builds them. Both draxr-scheduler and the
// simulator's placement engine register these names, so one KubeSchedulerConfiguration
// serves the scheduler, the planner and the autoscaler alike.
package aliases

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
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
// with the handle that wrap returns (nil: the handle as given). With
// deviceFull set, DraxrDynamicResources rejects pods that need a device
// on nodes with none left without upstream's fleet-wide search (see
// devicefull), in clusters of at least deviceFull.MinSlices slices: the
// scheduler's choice; the planner (nil) leaves such nodes out before it
// filters.
func Registry(wrap func(fwk.Handle) fwk.Handle, deviceFull *DeviceFull) frameworkruntime.Registry {
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
			var dra fwk.SharedDRAManager
			var minSlices int
			if deviceFull != nil {
				dra, minSlices = h.SharedDRAManager(), deviceFull.MinSlices
			}
			return rename(p, alias, cycleViewOf(h), dra, minSlices)
		}
	}
	return out
}

// DeviceFull configures DraxrDynamicResources' device-full verdict.
type DeviceFull struct {
	// MinSlices: with fewer ResourceSlices in the cluster upstream decides
	// every node (devicefull.DefaultMinSlices for the scheduler).
	MinSlices int
}

// CycleView is implemented by a DeviceClassResolver whose mapping can
// change while the scheduler runs (draxr-scheduler's, fed by informers).
// The upstream plugins read the resolver at PreFilter, Filter and Score
// without a cycle to name, so the wrapped plugins tell it where a
// scheduling cycle begins and ends: between the two, every read sees the
// mapping the cycle began with, and two plugins cannot disagree about
// whether a name is DRA-backed (one leaving the resource to DRA while the
// other allocates nothing binds a pod without its devices).
type CycleView interface {
	// BeginCycle pins the mapping for the cycle that owns state; it is
	// called by every plugin that may read first and is idempotent per
	// state. Called only from the scheduling cycle's own goroutine.
	BeginCycle(state fwk.CycleState)
	// EndCycle releases the pin when the scheduling cycle's reads are done.
	EndCycle()
	// Verify fails, as unschedulable, a pod asking an extended resource
	// name that its cycle saw DRA-backed and that no class backs now.
	Verify(state fwk.CycleState, pod *v1.Pod) *fwk.Status
}

// cycleViewOf returns the handle's resolver as a CycleView, or nil.
func cycleViewOf(h fwk.Handle) CycleView {
	dra := h.SharedDRAManager()
	if dra == nil {
		return nil
	}
	view, _ := dra.DeviceClassResolver().(CycleView)
	return view
}

// noCycleView serves resolvers that do not change during a cycle (the
// simulator's snapshot) and upstream's.
type noCycleView struct{}

func (noCycleView) BeginCycle(fwk.CycleState)                  {}
func (noCycleView) EndCycle()                                  {}
func (noCycleView) Verify(fwk.CycleState, *v1.Pod) *fwk.Status { return nil }
