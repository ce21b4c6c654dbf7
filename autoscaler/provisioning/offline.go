package provisioning

import (
	"context"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/loopstep"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaleup"
)

// OfflineStep is this step as draxr simulate runs it on a dump: the
// loop's own Processor (Start, then Serve) over an API server held in
// memory, loop after loop while nothing else changes, until no request is
// left to decide now. Every loop decides on the plan's one simulation, so
// each request sees the room the earlier ones took (an atomic one's new
// nodes included) and the pending pods are planned after them all.
// instance and initialBackoff are the loop's
// --check-capacity-processor-instance and
// --provisioning-request-initial-backoff-time.
func OfflineStep(instance string, initialBackoff time.Duration) offline.RequestStep {
	return func(ctx context.Context, objs *input.Objects, sim *placement.Engine, planning scaleup.Config, now time.Time) ([]provreq.Report, error) {
		api, err := newMemoryAPI(objs)
		if err != nil {
			return nil, err
		}
		// One request a loop, CA's default (no batch processing): each is
		// decided in the order the loop takes them, oldest first.
		p := New(Config{Requests: prlisters.NewProvisioningRequestLister(api.requests),
			Templates: corelisters.NewPodTemplateLister(api.templates), Client: api,
			InitialBackoff: initialBackoff, ProcessorInstance: instance})
		l := &offlineLoop{st: &clusterstate.State{Objects: objs, Groups: planning.Groups}, sim: sim, planning: planning, now: now}
		return l.serveAll(ctx, p, objs.RunningPods)
	}
}

// serveAll runs the step loop after loop until one decides nothing, and
// reports every request served as the last loop leaves it, with the
// scale-up its decision asked for.
func (l *offlineLoop) serveAll(ctx context.Context, p *Processor, running []*v1.Pod) ([]provreq.Report, error) {
	decided := map[string][]provreq.ReportScaleUp{}
	for {
		r, err := p.Start(ctx, running, l.now)
		if err != nil {
			return nil, err
		}
		if err := r.Serve(ctx, l); err != nil {
			return nil, err
		}
		if len(r.Reports) == 0 {
			out := make([]provreq.Report, 0, len(r.Served))
			for _, pr := range r.Served {
				out = append(out, provreq.ReportOf(pr, decided[provreq.Key(pr)]))
			}
			return out, nil
		}
		for _, rep := range r.Reports {
			decided[rep.Namespace+"/"+rep.Name] = rep.ScaleUp
		}
	}
}

// offlineLoop is a loop as the step sees it, on a dump: one simulation
// for every loop (the plan's: what an earlier loop booked or kept there
// is not booked again), no events, no cloud.
type offlineLoop struct {
	st       *clusterstate.State
	sim      *placement.Engine
	planning scaleup.Config
	now      time.Time
}

var _ loopstep.Loop = (*offlineLoop)(nil)

func (l *offlineLoop) State() *clusterstate.State     { return l.st }
func (l *offlineLoop) Now() time.Time                 { return l.now }
func (l *offlineLoop) Recorder() record.EventRecorder { return nil }

func (l *offlineLoop) SharedSimulation(context.Context) (*placement.Engine, error) { return l.sim, nil }

func (l *offlineLoop) Planner(sim *placement.Engine, groups []*nodegroup.NodeGroup) *scaleup.Planner {
	c := l.planning
	c.Groups = groups
	return scaleup.NewPlanner(sim, c)
}

// ScaleUpAllOrNone: a plan asks no cloud; the decision's new nodes are
// in the simulation already, as the loop's upcoming nodes would be.
// Nothing is promised, so the reports say nothing of atomicity.
func (l *offlineLoop) ScaleUpAllOrNone(_ context.Context, step []scaleup.ScaleUp) ([]loopstep.ScaledUp, error) {
	out := make([]loopstep.ScaledUp, len(step))
	for i, su := range step {
		out[i] = loopstep.ScaledUp{NodeGroup: su.NodeGroup, NewNodes: su.NewNodes}
	}
	return out, nil
}

// memoryAPI is the API server of a dump's requests and templates, held in
// memory: a write lands in the store the processor lists from with a new
// resourceVersion, as the API server's would.
type memoryAPI struct {
	requests, templates cache.Indexer
	version             int
}

func newMemoryAPI(objs *input.Objects) (*memoryAPI, error) {
	api := &memoryAPI{requests: newStore(), templates: newStore()}
	for _, pr := range objs.ProvisioningRequests {
		if err := api.requests.Add(pr.DeepCopy()); err != nil {
			return nil, fmt.Errorf("ProvisioningRequest %s: %w", provreq.Key(pr), err)
		}
	}
	for _, t := range objs.PodTemplates {
		if err := api.templates.Add(t); err != nil {
			return nil, fmt.Errorf("PodTemplate %s/%s: %w", t.Namespace, t.Name, err)
		}
	}
	return api, nil
}

func newStore() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func (a *memoryAPI) Get(_ context.Context, namespace, name string) (*prv1.ProvisioningRequest, error) {
	obj, ok, err := a.requests.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(prv1.Resource("provisioningrequests"), name)
	}
	return obj.(*prv1.ProvisioningRequest).DeepCopy(), nil
}

func (a *memoryAPI) UpdateStatus(ctx context.Context, pr *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error) {
	if _, err := a.Get(ctx, pr.Namespace, pr.Name); err != nil {
		return nil, err
	}
	a.version++
	out := pr.DeepCopy()
	out.ResourceVersion = "memory-" + strconv.Itoa(a.version)
	if err := a.requests.Update(out); err != nil {
		return nil, err
	}
	return out.DeepCopy(), nil
}

func (a *memoryAPI) Delete(_ context.Context, namespace, name string) error {
	obj, ok, err := a.requests.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return apierrors.NewNotFound(prv1.Resource("provisioningrequests"), name)
	}
	return a.requests.Delete(obj)
}
