// Package placement runs the upstream kube-scheduler framework, with the
// in-tree plugins, over a simulator snapshot. It answers "would the
// scheduler accept this pod on this node?" and, when asked to place the pod,
// commits into the snapshot what the scheduler would write when binding:
// allocated, reserved ResourceClaims (including the extended-resource claim
// of KEP-5004) and the pod's status.
package placement

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/simulator/snapshot"
)

var initMetrics sync.Once

// Engine binds one framework instance to one snapshot.
type Engine struct {
	// pluginCtx carries the pass's logger and no deadline: a simulation
	// is in-memory work that is never cancelled half-way. It is made
	// once, not per plugin call (thousands of calls per pod).
	pluginCtx context.Context
	fw        framework.Framework
	snap      *snapshot.Snapshot
	// schedulerName is the profile's: the scheduler only tries pods whose
	// spec.schedulerName it is.
	schedulerName string
	profile       *config.KubeSchedulerProfile
	// resourceFilter caches whether the profile filters on NodeResourcesFit.
	resourceFilter *bool
	// deviceFilter caches whether the profile filters on DynamicResources.
	deviceFilter *bool
	// like, while set, is a placed pod the one being placed is a replica
	// of (PlaceOnAnyNodeLike).
	like types.UID
	// verify holds the shortcuts to the full path (VerifyShortcutsEnv).
	verify bool
	// scored is the names of the nodes being scored, reused.
	scored []string
	// kept is the spread and affinity PreFilter state kept across cycles.
	kept *keptStates
	// rejects is the nodes anti-affinity or spread kept kinds of pod off.
	rejects *rejectMemo
	// requests memoizes pods' requests (requestsOf).
	requests map[*v1.Pod]v1.ResourceList
}

// New builds the framework from a profile (nil: kube-scheduler's default
// profile) over the snapshot. Feature gates are the process defaults, which
// for v1.37 include DRAExtendedResource.
func New(ctx context.Context, snap *snapshot.Snapshot, profile *config.KubeSchedulerProfile) (*Engine, error) {
	initMetrics.Do(schedmetrics.Register)
	if profile == nil {
		var err error
		if profile, err = DefaultProfile(); err != nil {
			return nil, err
		}
	}
	// Plugins take listers from the factory when they are built; the
	// factory is never started, so it has no client and makes no calls.
	factory := informers.NewSharedInformerFactory(nil, 0)
	// draxr-scheduler's plugin names resolve to the same upstream plugins;
	// the snapshot is already the DeviceClassResolver they need.
	registry := plugins.NewInTreeRegistry()
	if err := registry.Merge(aliases.Registry(nil, nil)); err != nil {
		return nil, err
	}
	verify := verifyEnabled()
	kept := newKeptStates(snap, verify)
	kept.wrap(registry)
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snap),
		frameworkruntime.WithSharedDRAManager(snap),
		// Plugins built with GenericWorkload on read pod groups from it.
		frameworkruntime.WithPodGroupManager(snap),
		frameworkruntime.WithMutableSnapshotLister(readOnlyMutations{snap}),
		// The framework logs its plugin set at V(2); every loop builds one.
		frameworkruntime.WithLogger(klog.FromContext(ctx).V(3)),
	)
	if err != nil {
		return nil, fmt.Errorf("build scheduler framework for profile %q: %w", profile.SchedulerName, err)
	}
	return &Engine{pluginCtx: klog.NewContext(context.Background(), klog.FromContext(ctx)), fw: fw, snap: snap, schedulerName: profile.SchedulerName, profile: profile,
		verify: verify, kept: kept, rejects: newRejectMemo(snap)}, nil
}

// context is what the plugins run with: the pass's logger, no deadline.
func (eng *Engine) context() context.Context { return eng.pluginCtx }

// SchedulerName is the name of the profile the placement engine runs.
func (eng *Engine) SchedulerName() string { return eng.schedulerName }

// Snapshot is the state this engine reads and writes.
func (eng *Engine) Snapshot() *snapshot.Snapshot { return eng.snap }

// cycle is one scheduling attempt of one pod: PreFilter ran once, Filter
// can run on several nodes.
type cycle struct {
	pod    *v1.Pod
	state  *framework.CycleState
	filter *fwk.PreFilterResult
	// least is PodTopologySpread's least counts (spreadLeast), read once.
	least     []int
	leastRead bool
}

func (eng *Engine) preFilter(pod *v1.Pod, candidates []string) (*cycle, *FitError) {
	pod, err := eng.ensureTemplateClaims(pod)
	if err != nil {
		return nil, &FitError{Pod: podKey(pod), PreFilter: []Reason{{Message: err.Error()}}}
	}
	state := framework.NewCycleState()
	eng.snap.SetCycleScope(pod.UID, candidates)
	defer eng.snap.ClearCycleScope()
	res, st, _ := eng.fw.RunPreFilterPlugins(eng.context(), state, pod)
	if !st.IsSuccess() {
		return nil, &FitError{Pod: podKey(pod), PreFilter: reasonsFromStatus(st)}
	}
	return &cycle{pod: pod, state: state, filter: res}, nil
}

func (eng *Engine) filter(c *cycle, nodeName string) []Reason {
	ni := eng.snap.NodeInfo(nodeName)
	if ni == nil {
		return []Reason{{Message: fmt.Sprintf("node %s does not exist", nodeName)}}
	}
	if c.filter != nil && !c.filter.AllNodes() && !c.filter.NodeNames.Has(nodeName) {
		return []Reason{{Message: "node is excluded by PreFilter result"}}
	}
	return reasonsFromStatus(eng.fw.RunFilterPlugins(eng.context(), c.state, c.pod, ni))
}

// fits is filter without the reasons. A node anti-affinity rejected the
// pod's kind on, with only additions since, is not filtered again.
func (eng *Engine) fits(c *cycle, nodeName string) bool {
	ni := eng.snap.NodeInfo(nodeName)
	if ni == nil || c.filter != nil && !c.filter.AllNodes() && !c.filter.NodeNames.Has(nodeName) {
		return false
	}
	kind := eng.kept.keyOf(c.pod)
	if eng.rejects.rejects(kind, nodeName, c) {
		if eng.verify {
			eng.verifyRejects(c, ni)
		}
		return false
	}
	st := eng.fw.RunFilterPlugins(eng.context(), c.state, c.pod, ni)
	eng.rejects.saw(kind, nodeName, st, c)
	return st.IsSuccess()
}

// verifyRejects holds a remembered rejection to the full Filter, in the
// same cycle.
func (eng *Engine) verifyRejects(c *cycle, ni fwk.NodeInfo) {
	if eng.fw.RunFilterPlugins(eng.context(), c.state, c.pod, ni).IsSuccess() {
		ShortcutDiffers("remembered rejection", "pod %s was kept off node %s, which the scheduler's plugins accept", podKey(c.pod), ni.Node().Name)
	}
}

// CheckPredicates runs PreFilter and Filter for a pod on a node and changes
// nothing. It returns nil when the pod fits.
func (eng *Engine) CheckPredicates(pod *v1.Pod, nodeName string) *FitError {
	eng.snap.Fork() // template claims generated for the check are not kept
	defer eng.snap.Revert()
	c, ferr := eng.preFilter(pod, []string{nodeName})
	if ferr != nil {
		return ferr
	}
	if rs := eng.filter(c, nodeName); len(rs) > 0 {
		return &FitError{Pod: podKey(pod), PerNode: map[string][]Reason{nodeName: rs}}
	}
	return nil
}

// Place schedules the pod onto nodeName if it fits there and returns the
// placed pod as it is now stored in the snapshot.
func (eng *Engine) Place(pod *v1.Pod, nodeName string) (*v1.Pod, *FitError) {
	_, placed, err := eng.PlaceOnAnyNode(pod, []string{nodeName})
	return placed, err
}

// PlaceOnAnyNode tries the candidate nodes in order and places the pod on
// the first that fits. It returns the node, the placed pod, or why none fit.
func (eng *Engine) PlaceOnAnyNode(pod *v1.Pod, candidates []string) (string, *v1.Pod, *FitError) {
	return eng.placeOnFirst(pod, candidates, slices.Values(candidates), true)
}

// PlaceOnFirstFitting is PlaceOnAnyNode for callers that do not read why
// nodes rejected the pod: the reasons are not gathered (a first fit over
// hundreds of new nodes would build them for each). The FitError, when
// no node takes the pod, holds only a PreFilter rejection.
func (eng *Engine) PlaceOnFirstFitting(pod *v1.Pod, candidates []string) (string, *v1.Pod, *FitError) {
	return eng.placeOnFirst(pod, candidates, slices.Values(candidates), false)
}

// PlaceOnFirstFittingOf is PlaceOnFirstFitting over candidates found as
// they are tried, all of them among scope (the nodes PreFilter is run
// for): the first fit stops reading them at the node it takes.
func (eng *Engine) PlaceOnFirstFittingOf(pod *v1.Pod, scope []string, candidates iter.Seq[string]) (string, *v1.Pod, *FitError) {
	return eng.placeOnFirst(pod, scope, candidates, false)
}

func (eng *Engine) placeOnFirst(pod *v1.Pod, scope []string, candidates iter.Seq[string], why bool) (string, *v1.Pod, *FitError) {
	c, fitErr := eng.begin(pod, scope)
	if c == nil {
		return "", nil, fitErr
	}
	for nodeName := range candidates {
		if why {
			if rs := eng.filter(c, nodeName); len(rs) > 0 {
				fitErr.PerNode[nodeName] = rs
				continue
			}
		} else if !eng.fits(c, nodeName) {
			continue
		}
		placed, rs := eng.reserveAndCommit(c, nodeName)
		if len(rs) > 0 {
			if why {
				fitErr.PerNode[nodeName] = rs
			}
			continue
		}
		return nodeName, placed, nil
	}
	return "", nil, fitErr
}

// PlaceOnAnyNodeLike is PlaceOnAnyNode for a replica of the placed pod
// like (same namespace, requests and inter-pod terms): its scheduler pod
// info is copied when committed instead of computed again, which is most
// of committing a pod.
func (eng *Engine) PlaceOnAnyNodeLike(pod *v1.Pod, candidates []string, like types.UID) (string, *v1.Pod, *FitError) {
	eng.like = like
	defer func() { eng.like = "" }()
	return eng.PlaceOnAnyNode(pod, candidates)
}

// begin starts placing a pod: it refuses a placed pod and runs PreFilter.
// It returns the cycle and an empty FitError for per-node reasons, or no
// cycle and the error.
func (eng *Engine) begin(pod *v1.Pod, candidates []string) (*cycle, *FitError) {
	if ferr := eng.alreadyPlaced(pod); ferr != nil {
		return nil, ferr
	}
	c, ferr := eng.preFilter(pod, candidates)
	if ferr != nil {
		return nil, ferr
	}
	return c, &FitError{Pod: podKey(pod), PerNode: map[string][]Reason{}}
}

// alreadyPlaced refuses a pod whose UID is placed: committing it would fail
// after Reserve, and the DynamicResources plugin's Unreserve of a claim
// reserved for the pod patches it through the API client the placement engine does
// not have (nil: it panics).
func (eng *Engine) alreadyPlaced(pod *v1.Pod) *FitError {
	if _, node, ok := eng.snap.Pod(pod.UID); ok {
		return &FitError{Pod: podKey(pod), PreFilter: []Reason{{
			Message: fmt.Sprintf("pod with uid %q is already placed on node %s; remove it first", pod.UID, node)}}}
	}
	return nil
}

func (eng *Engine) reserveAndCommit(c *cycle, nodeName string) (*v1.Pod, []Reason) {
	if ferr := eng.alreadyPlaced(c.pod); ferr != nil {
		return nil, ferr.PreFilter
	}
	defer eng.snap.ClearPendingAllocations()
	if st := eng.fw.RunReservePluginsReserve(eng.context(), c.state, c.pod, nodeName); !st.IsSuccess() {
		eng.fw.RunReservePluginsUnreserve(eng.context(), c.state, c.pod, nodeName)
		return nil, reasonsFromStatus(st)
	}
	placed, err := eng.commit(c.pod, nodeName)
	if err != nil {
		eng.fw.RunReservePluginsUnreserve(eng.context(), c.state, c.pod, nodeName)
		return nil, []Reason{{Message: err.Error()}}
	}
	return placed, nil
}

func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// readOnlyMutations is the snapshot as the framework's mutable lister,
// which plugins built with GenericWorkload on take at construction. Only
// preemption mutates through it, and the placement engine never runs PostFilter.
type readOnlyMutations struct{ *snapshot.Snapshot }

var errNoPreemption = errors.New("preemption is not simulated")

func (readOnlyMutations) StartMutations() error { return errNoPreemption }
func (readOnlyMutations) EndMutations() error   { return errNoPreemption }
func (readOnlyMutations) AddPod(fwk.PodInfo, string) error {
	return errNoPreemption
}
func (readOnlyMutations) RemovePod(klog.Logger, *v1.Pod, string) error {
	return errNoPreemption
}
