package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"draxr.dev/draxr/simulator/snapshot"
)

// keptStates keeps the PreFilter state of InterPodAffinity and
// PodTopologySpread across scheduling cycles. Both walk every placed pod
// (InterPodAffinity those with anti-affinity, and all for a pod with
// terms of its own) once per pod scheduled: placing thousands of pods
// with spread or anti-affinity costs the square of their number. The
// state is the same for pods alike in what the plugins read (namespace,
// labels, node selection, tolerations, inter-pod terms, spread
// constraints), and the plugins' own PreFilterExtensions AddPod brings it
// up to date with the pods placed since, as the scheduler's preemption
// does. What AddPod does not cover is mended with the plugins' own code
// or the state is built afresh:
//   - a pod or node removed, a fork reverted, a terminating pod added
//     (spreading leaves those out, AddPod does not): afresh;
//   - nodes added: InterPodAffinity counts pods only; PodTopologySpread's
//     domains are the eligible nodes', so its PreFilter runs over the new
//     nodes alone and their domains join the counts (spreadDomainsAdded);
//   - PodTopologySpread's AddPod keeps its least-loaded domain right only
//     while that domain gains no pod, so the least count is found again
//     (spreadMinimum: from a few domains known to hold it, or from all);
//   - InterPodAffinity's Skip (a pod with no terms that no placed pod's
//     anti-affinity selects) holds until a pod whose anti-affinity selects
//     the pod's labels is added (affinitySkipHolds).
//
// Under the verify switch every kept state is held to a fresh one: both
// must give every node the same Filter verdict (docs/shortcuts.md).
type keptStates struct {
	snap   *snapshot.Snapshot
	verify bool
	// off turns keeping off (tests compare with the full path).
	off     bool
	keys    map[*v1.Pod]string
	entries map[keptKey]*keptState
	// hits counts the cycles that used a kept state, by plugin.
	hits map[string]int
}

// keptState is one plugin's state for one kind of pod, computed for pod
// and brought up to mark; skipped when PreFilter said Skip.
type keptState struct {
	pod     *v1.Pod
	skipped bool
	state   *framework.CycleState // holds data, for AddPod to read
	data    fwk.StateData
	mark    snapshot.LogMark
	// spread and least are spreadMinimum's: the state's fields, read
	// once, and per constraint what it knows of the least count.
	spread *spreadView
	least  []spreadLeast
}

// keptKey is a plugin's name and a kind of pod (keyOf).
type keptKey struct{ plugin, kind string }

// maxKept bounds the kinds kept; past it they are all built afresh.
const maxKept = 64

// statePlugin is an upstream plugin whose PreFilter state is kept.
type statePlugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

// keptPlugin says how one plugin's state is kept.
type keptPlugin struct {
	statePlugin
	// stateKey is where the plugin's PreFilter writes its state.
	stateKey fwk.StateKey
	// nodesAdded brings a state up to date with nodes added since it was
	// (the pods on them AddPod has counted); nil: nodes do not matter.
	nodesAdded func(ctx context.Context, pl keptPlugin, e *keptState, nodes []*framework.NodeInfo) bool
	// podsAdded fixes what AddPod leaves wrong, after the pods and nodes
	// added are counted; false when it cannot.
	podsAdded func(e *keptState, added snapshot.Added) bool
	// skipHolds says whether a Skip for rep still holds once pod is
	// added; nil: a Skip is not kept.
	skipHolds func(rep *v1.Pod, pod fwk.PodInfo) bool
}

func newKeptStates(snap *snapshot.Snapshot, verify bool) *keptStates {
	snap.LogAdditions()
	return &keptStates{snap: snap, verify: verify, keys: map[*v1.Pod]string{}, entries: map[keptKey]*keptState{}, hits: map[string]int{}}
}

// wrap makes the registry build InterPodAffinity, PodTopologySpread and
// NodeResourcesFit with their PreFilter state kept.
func (k *keptStates) wrap(registry frameworkruntime.Registry) {
	for name, keep := range map[string]func(fwk.Plugin) fwk.Plugin{
		names.InterPodAffinity: func(p fwk.Plugin) fwk.Plugin {
			if pl, ok := p.(*interpodaffinity.InterPodAffinity); ok {
				return &keptInterPodAffinity{pl, k, keptPlugin{statePlugin: pl, stateKey: preFilterStateKey(pl), skipHolds: affinitySkipHolds}}
			}
			return p
		},
		names.PodTopologySpread: func(p fwk.Plugin) fwk.Plugin {
			if pl, ok := p.(*podtopologyspread.PodTopologySpread); ok {
				return &keptPodTopologySpread{pl, k, keptPlugin{statePlugin: pl, stateKey: preFilterStateKey(pl),
					nodesAdded: spreadDomainsAdded, podsAdded: spreadMinimum}}
			}
			return p
		},
		names.NodeResourcesFit: func(p fwk.Plugin) fwk.Plugin {
			if pl, ok := p.(*noderesources.Fit); ok {
				return &keptFit{Fit: pl, stateKey: preFilterStateKey(pl), states: map[*v1.Pod]fwk.StateData{}}
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

// preFilterStateKey is where an in-tree plugin's PreFilter writes its
// state (each names it "PreFilter" and its own name).
func preFilterStateKey(pl fwk.Plugin) fwk.StateKey { return fwk.StateKey("PreFilter" + pl.Name()) }

// keptInterPodAffinity counts pods only: an empty node added changes
// nothing it counts.
type keptInterPodAffinity struct {
	*interpodaffinity.InterPodAffinity
	kept *keptStates
	how  keptPlugin
}

func (pl *keptInterPodAffinity) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return pl.kept.preFilter(ctx, pl.how, cs, pod, nodes)
}

// keptPodTopologySpread counts per domain of the eligible nodes.
type keptPodTopologySpread struct {
	*podtopologyspread.PodTopologySpread
	kept *keptStates
	how  keptPlugin
}

func (pl *keptPodTopologySpread) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return pl.kept.preFilter(ctx, pl.how, cs, pod, nodes)
}

// keptFit keeps NodeResourcesFit's PreFilter state per pod: it is the
// pod's requests alone, which the plugin treats as never changing (its
// Clone returns it as it is), and summing them is most of the allocation
// of a cycle when one pod is tried on hundreds of node groups' templates.
// Pods are never changed once handed to the engine.
type keptFit struct {
	*noderesources.Fit
	stateKey fwk.StateKey
	states   map[*v1.Pod]fwk.StateData
}

func (pl *keptFit) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if data, ok := pl.states[pod]; ok {
		cs.Write(pl.stateKey, data)
		return nil, nil
	}
	res, st := pl.Fit.PreFilter(ctx, cs, pod, nodes)
	if res != nil || !st.IsSuccess() {
		return res, st
	}
	if data, err := cs.Read(pl.stateKey); err == nil {
		if len(pl.states) >= 1<<16 {
			clear(pl.states)
		}
		pl.states[pod] = data
	}
	return res, st
}

// preFilter writes the kept state of the pod's kind, brought up to date,
// or runs the plugin's PreFilter and keeps what it wrote. A state written
// with success is kept, and a Skip where the plugin says how long it
// holds; a node-name result is not.
func (k *keptStates) preFilter(ctx context.Context, pl keptPlugin, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key := k.keyOf(pod)
	if key == "" {
		return pl.PreFilter(ctx, cs, pod, nodes)
	}
	entry := keptKey{plugin: pl.Name(), kind: key}
	if e := k.entries[entry]; e != nil {
		if k.catchUp(ctx, pl, e) {
			k.hits[pl.Name()]++
			if k.verify {
				k.verifyKept(ctx, pl, pod, nodes, e.data)
			}
			if e.skipped {
				return nil, fwk.NewStatus(fwk.Skip)
			}
			// The kept state itself, not a copy (copying is most of what
			// keeping costs): Filter and Score only read it, and every
			// cycle of the engine ends before the next one's PreFilter
			// brings it up to date.
			cs.Write(pl.stateKey, e.data)
			return nil, nil
		}
		delete(k.entries, entry)
	}
	res, st := pl.PreFilter(ctx, cs, pod, nodes)
	if res != nil || !st.IsSuccess() && (!st.IsSkip() || pl.skipHolds == nil) {
		return res, st
	}
	e := &keptState{pod: pod, skipped: st.IsSkip(), mark: k.snap.Mark()}
	if !e.skipped {
		data, err := cs.Read(pl.stateKey)
		if err != nil {
			return res, st
		}
		e.state, e.data = framework.NewCycleState(), data.Clone()
		e.state.Write(pl.stateKey, e.data)
	}
	if len(k.entries) >= maxKept {
		clear(k.entries)
	}
	k.entries[entry] = e
	return res, st
}

// catchUp adds to the kept state the pods and nodes added since it was
// brought up to date; false when that cannot make it what PreFilter would
// compute.
func (k *keptStates) catchUp(ctx context.Context, pl keptPlugin, e *keptState) bool {
	added, ok := k.snap.AddedSince(e.mark)
	if !ok {
		return false
	}
	if len(added.Pods) == 0 && (len(added.Nodes) == 0 || pl.nodesAdded == nil || e.skipped) {
		return true
	}
	ext := pl.PreFilterExtensions()
	for _, a := range added.Pods {
		switch {
		case a.Info.GetPod().DeletionTimestamp != nil:
			return false
		case e.skipped:
			if !pl.skipHolds(e.pod, a.Info) {
				return false
			}
		case !ext.AddPod(ctx, e.state, e.pod, a.Info, a.Node).IsSuccess():
			return false
		}
	}
	if !e.skipped {
		if len(added.Nodes) > 0 && pl.nodesAdded != nil && !pl.nodesAdded(ctx, pl, e, added.Nodes) {
			return false
		}
		if pl.podsAdded != nil && !pl.podsAdded(e, added) {
			return false
		}
	}
	e.mark = k.snap.Mark()
	return true
}

// affinitySkipHolds: InterPodAffinity skips a pod with no terms of its
// own while no placed pod's anti-affinity can match it. A pod added whose
// required anti-affinity selects the pod's labels (in any namespace: a
// test wider than the plugin's) may end that.
func affinitySkipHolds(rep *v1.Pod, pod fwk.PodInfo) bool {
	for _, t := range pod.GetRequiredAntiAffinityTerms() {
		if t.Selector == nil || t.Selector.Matches(labels.Set(rep.Labels)) {
			return false
		}
	}
	return true
}

// spreadDomainsAdded adds to PodTopologySpread's counts the domains of
// nodes added since, found by its own PreFilter over those nodes alone: a
// domain no pod has reached yet counts no pods, and an eligible node of
// it makes it one the pod may be placed in (the minimum may fall to 0).
// Domains pods were added to are counted already (AddPod).
func spreadDomainsAdded(ctx context.Context, pl keptPlugin, e *keptState, nodes []*framework.NodeInfo) bool {
	added := make([]fwk.NodeInfo, len(nodes))
	for i, ni := range nodes {
		added[i] = ni
	}
	fresh := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, fresh, e.pod, added); !st.IsSuccess() {
		return false
	}
	data, err := fresh.Read(pl.stateKey)
	if err != nil {
		return false
	}
	from, ok := spreadCounts(data)
	into, ok2 := spreadCounts(e.data)
	if !ok || !ok2 || len(from) != len(into) {
		return false
	}
	for i, byValue := range from {
		for v, n := range byValue {
			if _, seen := into[i][v]; !seen {
				into[i][v] = n
			}
		}
	}
	return true
}

// spreadCounts is PodTopologySpread's matching pods per constraint and
// domain, read by field name (the maps themselves, to add to).
func spreadCounts(data fwk.StateData) ([]map[string]int, bool) {
	s := reflect.ValueOf(data)
	if s.Kind() != reflect.Pointer || s.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	counts := s.Elem().FieldByName("TpValueToMatchNum")
	if !counts.IsValid() || !counts.CanInterface() {
		return nil, false
	}
	perConstraint, ok := counts.Interface().([]map[string]int)
	return perConstraint, ok
}

// spreadMinimum sets PodTopologySpread's least-loaded domains (its
// critical paths, of which Filter reads the least count) from the counts
// per domain; false when the plugin's fields are not what spreadView
// reads, and the state is computed afresh. Walking every domain per
// catch-up costs a pass over thousands of hostname domains per pod, so
// the least count is kept with a few domains that held it (spreadLeast)
// and the domains are walked only when fewer than two of those still
// hold it.
func spreadMinimum(e *keptState, added snapshot.Added) bool {
	if e.spread == nil {
		// The kept state is changed in place, never replaced: read its
		// fields once.
		v, ok := readSpread(e.data)
		if !ok {
			return false
		}
		e.spread, e.least = v, make([]spreadLeast, len(v.counts))
	}
	for i, byValue := range e.spread.counts {
		l := &e.least[i]
		l.catchUp(byValue, e.spread.keys[i], added)
		e.spread.setPaths(i, l.paths())
	}
	return true
}

// spreadView is PodTopologySpread's PreFilter state read by field name
// (the type is the plugin's own, unexported): per constraint, the
// matching pods per domain, the two least-loaded domains, the topology
// key and minDomains.
type spreadView struct {
	counts     []map[string]int
	paths      []reflect.Value // each the plugin's *[2]criticalPath
	keys       []string
	minDomains []int
}

// readSpread views the plugin's state; false when its fields are not
// there or not of the types read (upstream changed them).
func readSpread(data fwk.StateData) (*spreadView, bool) {
	counts, ok := spreadCounts(data)
	if !ok {
		return nil, false
	}
	n := len(counts)
	s := reflect.ValueOf(data).Elem()
	paths, constraints := s.FieldByName("CriticalPaths"), s.FieldByName("Constraints")
	if paths.Kind() != reflect.Slice || constraints.Kind() != reflect.Slice || paths.Len() != n || constraints.Len() != n {
		return nil, false
	}
	v := &spreadView{counts: counts, paths: make([]reflect.Value, n), keys: make([]string, n), minDomains: make([]int, n)}
	for i := range n {
		two, c := paths.Index(i), constraints.Index(i)
		if two.Kind() != reflect.Pointer || two.IsNil() || two.Elem().Kind() != reflect.Array || two.Elem().Len() != 2 {
			return nil, false
		}
		for j := range 2 {
			value, num := two.Elem().Index(j).FieldByName("TopologyValue"), two.Elem().Index(j).FieldByName("MatchNum")
			if !value.CanSet() || !num.CanSet() || value.Kind() != reflect.String || num.Kind() != reflect.Int {
				return nil, false
			}
		}
		key, minDomains := c.FieldByName("TopologyKey"), c.FieldByName("MinDomains")
		if key.Kind() != reflect.String || minDomains.Kind() != reflect.Int32 {
			return nil, false
		}
		v.paths[i], v.keys[i], v.minDomains[i] = two, key.String(), int(minDomains.Int())
	}
	return v, true
}

// least is constraint i's least count as Filter reads it: 0 while fewer
// domains than minDomains are counted.
func (v *spreadView) least(i int) int {
	if len(v.counts[i]) < v.minDomains[i] {
		return 0
	}
	return int(v.paths[i].Elem().Index(0).FieldByName("MatchNum").Int())
}

// setPaths writes constraint i's two least-loaded domains.
func (v *spreadView) setPaths(i int, two [2]domainCount) {
	for j, d := range two {
		path := v.paths[i].Elem().Index(j)
		path.FieldByName("TopologyValue").SetString(d.value)
		path.FieldByName("MatchNum").SetInt(int64(d.n))
	}
}

// spreadLeast is one constraint's least count and up to spreadWitnesses
// domains that held it. Between catch-ups counts only grow (a removal
// builds the state afresh), so the least is unchanged while one of those
// domains still holds it, unless a domain new since holds fewer: new
// domains are only those of the nodes added and of the nodes pods were
// added to. With fewer than two left, every domain is walked again.
type spreadLeast struct {
	n      int
	at     []string
	second domainCount // the least domain after at[0] when at has one
	known  bool
}

type domainCount struct {
	value string
	n     int
}

const spreadWitnesses = 16

func (l *spreadLeast) catchUp(byValue map[string]int, key string, added snapshot.Added) {
	if l.known {
		for _, a := range added.Pods {
			l.consider(byValue, a.Node.Node().Labels[key])
		}
		for _, ni := range added.Nodes {
			l.consider(byValue, ni.Node().Labels[key])
		}
		l.at = slices.DeleteFunc(l.at, func(v string) bool { return byValue[v] != l.n })
	}
	if len(l.at) < 2 {
		l.walk(byValue)
	}
}

// consider takes in a domain that may be new since the last catch-up.
func (l *spreadLeast) consider(byValue map[string]int, v string) {
	c, ok := byValue[v]
	switch {
	case !ok || c > l.n:
	case c < l.n:
		l.n, l.at = c, append(l.at[:0], v)
	case len(l.at) < spreadWitnesses && !slices.Contains(l.at, v):
		l.at = append(l.at, v)
	}
}

// walk finds the least count, its domains (up to spreadWitnesses, the
// least values first among those seen) and the next least domain.
func (l *spreadLeast) walk(byValue map[string]int) {
	l.n, l.at, l.known = math.MaxInt32, l.at[:0], true
	l.second = domainCount{n: math.MaxInt32}
	for v, c := range byValue {
		switch {
		case c < l.n:
			if len(l.at) > 0 {
				l.second = domainCount{l.at[0], l.n}
			}
			l.n, l.at = c, append(l.at[:0], v)
		case c == l.n:
			if len(l.at) < spreadWitnesses {
				l.at = append(l.at, v)
			}
		case c < l.second.n:
			l.second = domainCount{v, c}
		}
	}
	slices.Sort(l.at)
}

// paths are the two least-loaded domains, as the plugin's critical paths
// hold them.
func (l *spreadLeast) paths() [2]domainCount {
	switch len(l.at) {
	case 0:
		return [2]domainCount{{n: math.MaxInt32}, {n: math.MaxInt32}}
	case 1:
		return [2]domainCount{{l.at[0], l.n}, l.second}
	}
	return [2]domainCount{{l.at[0], l.n}, {l.at[1], l.n}}
}

// kindKey is what the two plugins' PreFilter read of the pod being
// scheduled: pods alike in it get the same state.
type kindKey struct {
	Namespace    string                        `json:"n"`
	Labels       map[string]string             `json:"l,omitempty"`
	NodeSelector map[string]string             `json:"s,omitempty"`
	Affinity     *v1.Affinity                  `json:"a,omitempty"`
	Tolerations  []v1.Toleration               `json:"t,omitempty"`
	Spread       []v1.TopologySpreadConstraint `json:"c,omitempty"`
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
		if b, err := json.Marshal(kindKey{Namespace: pod.Namespace, Labels: pod.Labels, NodeSelector: pod.Spec.NodeSelector,
			Affinity: pod.Spec.Affinity, Tolerations: pod.Spec.Tolerations, Spread: pod.Spec.TopologySpreadConstraints}); err == nil {
			key = string(b)
		}
	}
	if len(k.keys) >= 1<<16 {
		clear(k.keys)
	}
	k.keys[pod] = key
	return key
}

// verifyKept holds a kept state (nil: a kept Skip, which passes every
// node) to the one PreFilter computes now: every node must get the same
// Filter verdict from both.
func (k *keptStates) verifyKept(ctx context.Context, pl keptPlugin, pod *v1.Pod, nodes []fwk.NodeInfo, kept fwk.StateData) {
	keptCS := framework.NewCycleState()
	if kept != nil {
		keptCS.Write(pl.stateKey, kept.Clone())
	}
	freshCS := framework.NewCycleState()
	_, st := pl.PreFilter(ctx, freshCS, pod, nodes)
	for _, ni := range nodes {
		want, got := "", ""
		if !st.IsSkip() {
			want = verdict(pl.Filter(ctx, freshCS, pod, ni))
		}
		if kept != nil {
			got = verdict(pl.Filter(ctx, keptCS, pod, ni))
		}
		if got != want {
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
