package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"draxr.dev/draxr/simulator/snapshot"
)

// keptStates keeps InterPodAffinity's PreFilter state across scheduling
// cycles. Its PreFilter walks every placed pod with anti-affinity, and
// every placed pod for a pod with terms of its own, once per pod
// scheduled: placing thousands of pods beside anti-affinity costs the
// square of their number. The state is the same for pods alike in what
// the plugin reads (namespace, labels, inter-pod terms), it counts pods
// only (an empty node added changes nothing), and the plugin's own
// PreFilterExtensions AddPod brings it up to date with the pods placed
// since, as the scheduler's preemption does. It is built afresh when pods
// were removed or a fork reverted. PodTopologySpread's state is not kept:
// its AddPod tracks only the two least-loaded domains, which adding pod
// after pod leaves wrong (the third-least domain is lost). Under the
// verify switch every kept state is held to a fresh one: both must give
// every node the same Filter verdict (docs/shortcuts.md).
type keptStates struct {
	snap   *snapshot.Snapshot
	verify bool
	// off turns keeping off (tests compare with the full path).
	off     bool
	keys    map[*v1.Pod]string
	entries map[string]*keptState
	// hits counts the cycles that used a kept state.
	hits int
}

// keptState is one plugin's state for one kind of pod, computed for pod
// and brought up to mark.
type keptState struct {
	pod   *v1.Pod
	state *framework.CycleState // holds data, for AddPod to read
	data  fwk.StateData
	mark  snapshot.LogMark
}

// maxKept bounds the kinds kept; past it they are all built afresh.
const maxKept = 64

// statePlugin is an upstream plugin whose PreFilter state is kept.
type statePlugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

func newKeptStates(snap *snapshot.Snapshot, verify bool) *keptStates {
	snap.LogPodAdds()
	return &keptStates{snap: snap, verify: verify, keys: map[*v1.Pod]string{}, entries: map[string]*keptState{}}
}

// wrap makes the registry build InterPodAffinity with its state kept.
func (k *keptStates) wrap(registry frameworkruntime.Registry) {
	for name, keep := range map[string]func(fwk.Plugin) fwk.Plugin{
		names.InterPodAffinity: func(p fwk.Plugin) fwk.Plugin {
			if pl, ok := p.(*interpodaffinity.InterPodAffinity); ok {
				return &keptInterPodAffinity{pl, k}
			}
			return p
		},
	} {
		build, ok := registry[name]
		if !ok {
			continue
		}
		registry[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := build(ctx, args, h)
			if err != nil {
				return nil, err
			}
			return keep(p), nil
		}
	}
}

type keptInterPodAffinity struct {
	*interpodaffinity.InterPodAffinity
	kept *keptStates
}

func (pl *keptInterPodAffinity) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return pl.kept.preFilter(ctx, pl.InterPodAffinity, cs, pod, nodes)
}

// preFilter writes the kept state of the pod's kind, brought up to date,
// or runs the plugin's PreFilter and keeps what it wrote. Only a state
// written with success is kept: Skip and a node-name result are cheap to
// compute and may stop holding once pods are added.
func (k *keptStates) preFilter(ctx context.Context, pl statePlugin, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key := k.keyOf(pod)
	if key == "" {
		return pl.PreFilter(ctx, cs, pod, nodes)
	}
	stateKey := fwk.StateKey("PreFilter" + pl.Name())
	entry := pl.Name() + "\x00" + key
	if e := k.entries[entry]; e != nil {
		if k.catchUp(ctx, pl, e) {
			data := e.data.Clone()
			if k.verify {
				k.verifyKept(ctx, pl, pod, nodes, data)
			}
			cs.Write(stateKey, data)
			k.hits++
			return nil, nil
		}
		delete(k.entries, entry)
	}
	res, st := pl.PreFilter(ctx, cs, pod, nodes)
	if res != nil || !st.IsSuccess() {
		return res, st
	}
	data, err := cs.Read(stateKey)
	if err != nil {
		return res, st
	}
	if len(k.entries) >= maxKept {
		clear(k.entries)
	}
	e := &keptState{pod: pod, state: framework.NewCycleState(), data: data.Clone(), mark: k.snap.Mark()}
	e.state.Write(stateKey, e.data)
	k.entries[entry] = e
	return res, st
}

// catchUp adds to the kept state the pods placed since it was brought up
// to date; false when that cannot make it what PreFilter would compute.
func (k *keptStates) catchUp(ctx context.Context, pl statePlugin, e *keptState) bool {
	added, ok := k.snap.AddedSince(e.mark)
	if !ok {
		return false
	}
	ext := pl.PreFilterExtensions()
	for _, a := range added {
		if st := ext.AddPod(ctx, e.state, e.pod, a.Info, a.Node); !st.IsSuccess() {
			return false
		}
	}
	e.mark = k.snap.Mark()
	return true
}

// kindKey is what InterPodAffinity's PreFilter reads of the pod being
// scheduled: pods alike in it get the same state.
type kindKey struct {
	Namespace string              `json:"n"`
	Labels    map[string]string   `json:"l,omitempty"`
	Affinity  *v1.PodAffinity     `json:"a,omitempty"`
	Anti      *v1.PodAntiAffinity `json:"x,omitempty"`
}

// keyOf is the pod's kind for kept states, "" when its state is not kept:
// off, or a deferred resize (the plugins skip such a pod).
func (k *keptStates) keyOf(pod *v1.Pod) string {
	if k.off {
		return ""
	}
	if key, ok := k.keys[pod]; ok {
		return key
	}
	key := ""
	if !slices.ContainsFunc(pod.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.PodResizePending }) {
		kind := kindKey{Namespace: pod.Namespace, Labels: pod.Labels}
		if a := pod.Spec.Affinity; a != nil {
			kind.Affinity, kind.Anti = a.PodAffinity, a.PodAntiAffinity
		}
		if b, err := json.Marshal(kind); err == nil {
			key = string(b)
		}
	}
	if len(k.keys) >= 1<<16 {
		clear(k.keys)
	}
	k.keys[pod] = key
	return key
}

// verifyKept holds a kept state to the one PreFilter computes now: every
// node must get the same Filter verdict from both.
func (k *keptStates) verifyKept(ctx context.Context, pl statePlugin, pod *v1.Pod, nodes []fwk.NodeInfo, kept fwk.StateData) {
	stateKey := fwk.StateKey("PreFilter" + pl.Name())
	keptCS := framework.NewCycleState()
	keptCS.Write(stateKey, kept.Clone())
	freshCS := framework.NewCycleState()
	_, st := pl.PreFilter(ctx, freshCS, pod, nodes)
	for _, ni := range nodes {
		want := ""
		if !st.IsSkip() {
			want = verdict(pl.Filter(ctx, freshCS, pod, ni))
		}
		if got := verdict(pl.Filter(ctx, keptCS, pod, ni)); got != want {
			ShortcutDiffers("kept PreFilter state", "%s: pod %s on node %s: %q kept, %q computed afresh",
				pl.Name(), podKey(pod), ni.Node().Name, got, want)
		}
	}
}

// verdict is a Filter status as compared: code and reasons, "" for success.
func verdict(st *fwk.Status) string {
	if st.IsSuccess() {
		return ""
	}
	return fmt.Sprintf("%s: %v", st.Code(), st.Reasons())
}
