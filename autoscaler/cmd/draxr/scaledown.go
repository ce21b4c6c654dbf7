package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/drainability"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/scaledown"
	"draxr.dev/draxr/simulator/view"
)

// scaleDownFlags are the scale-down flags of draxr-autoscaler that the
// "why is this node not removed?" answer depends on, with CA's defaults.
type scaleDownFlags struct {
	enabled              bool
	unneededTime         time.Duration
	unreadyTime          time.Duration
	utilizationThreshold float64
	gpuThreshold         float64
}

func (f *scaleDownFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "scale-down", false,
		"also say, for every node of an autoscaled group, what draxr-autoscaler's scale-down makes of it: removable now, "+
			"unneeded but waiting (NotUnneededLongEnough), or kept and by which rule (CA's reason names)")
	fs.DurationVar(&f.unneededTime, "scale-down-unneeded-time", 10*time.Minute, "with --scale-down: how long a node must be unneeded before it is removed")
	fs.DurationVar(&f.unreadyTime, "scale-down-unready-time", 20*time.Minute, "with --scale-down: how long an unready node waits before it is removed")
	fs.Float64Var(&f.utilizationThreshold, "scale-down-utilization-threshold", 0.5, "with --scale-down: nodes used below this share may be removed")
	fs.Float64Var(&f.gpuThreshold, "scale-down-gpu-utilization-threshold", 0.5, "with --scale-down: the same for nodes that publish DRA devices")
}

// explainer answers for the objects read; nil when there is nothing to
// answer for.
type explainer func(ctx context.Context) ([]scaledown.NodeVerdict, error)

// explain runs the autoscaler's own scale-down over listers (a synced
// informer factory's, or a dump's), in dry run (nothing is written: no
// client is given), with the local provider (read only) for groups and
// the clusterapi provider over capiSource when it is set. Both providers
// read nodes and slices from the same listers: one view of the cluster.
func (f *scaleDownFlags) explain(ctx context.Context, listers view.View, groups []*nodegroup.NodeGroup,
	capiSource *clusterapi.Source, p *providerFlags) ([]scaledown.NodeVerdict, error) {
	lp, err := local.New(local.Options{Nodes: listers.Nodes, Slices: listers.Slices, Groups: groups, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	providers := []cloudprovider.Provider{lp}
	if capiSource != nil {
		cp, err := p.newClusterAPI(*capiSource, listers.Nodes, listers.Slices)
		if err != nil {
			return nil, err
		}
		providers = append(providers, cp)
	}
	provider := cloudprovider.Join(providers...)
	exp, err := expander.New("least-waste", nil, 1)
	if err != nil {
		return nil, err
	}
	gpu := f.gpuThreshold
	a := core.New(core.Config{View: listers, Provider: provider, Expander: exp, DryRun: true,
		Recorder: &record.FakeRecorder{},
		ScaleDown: core.ScaleDownConfig{Enabled: true, UnneededTime: f.unneededTime,
			UtilizationThreshold: f.utilizationThreshold, GpuUtilizationThreshold: &gpu,
			ScaleDownActuation: core.ScaleDownActuation{Drainability: drainability.DefaultOptions(), UnreadyTime: f.unreadyTime}}})
	return a.ExplainScaleDown(ctx)
}

// dumpExplainer answers for a dump: the autoscaler reads the dump's
// objects through listers as it reads its informers, with the local
// provider (read only) for its NodeGroups and the clusterapi provider for
// its Cluster API groups. objs must be the objects as read, before
// planning added groups to them.
func (f *scaleDownFlags) dumpExplainer(objs *input.Objects, groups []*nodegroup.NodeGroup, p *providerFlags) explainer {
	return func(ctx context.Context) ([]scaledown.NodeVerdict, error) {
		listers, err := view.FromObjects(objs)
		if err != nil {
			return nil, err
		}
		var capiSource *clusterapi.Source
		if hasScalable(objs) && p.cloudProvider != providerLocal {
			src, err := clusterapi.DumpSource(objs)
			if err != nil {
				return nil, err
			}
			capiSource = &src
		}
		return f.explain(ctx, listers, groups, capiSource, p)
	}
}

// liveExplainer answers for the live cluster itself, read only, through
// informers on client; capi is nil when its Cluster API groups are not
// read.
func (f *scaleDownFlags) liveExplainer(client kubernetes.Interface, capi *clusterapi.Source, p *providerFlags,
	groups []*nodegroup.NodeGroup) explainer {
	return func(ctx context.Context) ([]scaledown.NodeVerdict, error) {
		factory := liveview.NewInformerFactory(client)
		listers := liveview.FromInformers(factory)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		factory.Start(ctx.Done())
		for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return nil, fmt.Errorf("scale-down: %v not synced", typ)
			}
		}
		return f.explain(ctx, listers, groups, capi, p)
	}
}

// asRead keeps what was read before planning adds groups, members'
// labels and stand-in nodes to objs.
func asRead(objs *input.Objects) *input.Objects {
	c := *objs
	c.Nodes = slices.Clone(objs.Nodes)
	c.ResourceSlices = slices.Clone(objs.ResourceSlices)
	c.NodeGroups = slices.Clone(objs.NodeGroups)
	return &c
}
