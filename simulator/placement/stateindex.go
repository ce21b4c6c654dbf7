package placement

import (
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"draxr.dev/draxr/simulator/snapshot"
)

// stateIndex is where each node state lies in a scan's order: the
// positions of its nodes, ascending. A cycle then finds the first node of
// each state from where its search starts, and how far the search goes
// before it has found the scheduler's number of feasible nodes, in a few
// steps per state instead of one per node: on 5,000 nodes with room, a
// walk over the search was most of a pod's cycle. It is brought up to
// date from the snapshot's change log: only a node given a pod changes
// state while pods are placed; anything else rebuilds it.
type stateIndex struct {
	built bool
	mark  snapshot.LogMark
	// keyOf is each position's state; a node without one is a state of
	// its own ("\x00" and its name).
	keyOf []string
	at    map[string][]int
	// lone counts the positions without a state.
	lone int
}

func (ix *stateIndex) refresh(eng *Engine, states *nodeStates, scan *NodeScan) {
	added, since := eng.snap.AddedSince(ix.mark)
	ix.mark = eng.snap.Mark()
	if !ix.built || !since {
		ix.built, ix.keyOf, ix.at, ix.lone = true, make([]string, len(scan.nodes)), map[string][]int{}, 0
		for pos, name := range scan.nodes {
			ix.set(pos, stateOrOwn(states, name))
		}
		return
	}
	for _, p := range added.Pods {
		name := p.Node.Node().Name
		if pos, ok := scan.index[name]; ok {
			if k := stateOrOwn(states, name); k != ix.keyOf[pos] {
				ix.unset(pos)
				ix.set(pos, k)
			}
		}
	}
}

func stateOrOwn(states *nodeStates, name string) string {
	if k := states.Key(name); k != "" {
		return k
	}
	return "\x00" + name
}

func (ix *stateIndex) set(pos int, key string) {
	ix.keyOf[pos] = key
	list := ix.at[key]
	i, _ := slices.BinarySearch(list, pos)
	ix.at[key] = slices.Insert(list, i, pos)
	if key[0] == 0 {
		ix.lone++
	}
}

func (ix *stateIndex) unset(pos int) {
	key := ix.keyOf[pos]
	list := ix.at[key]
	if i, found := slices.BinarySearch(list, pos); found {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(ix.at, key)
	} else {
		ix.at[key] = list
	}
	if key[0] == 0 {
		ix.lone--
	}
}

// stateRun is one state's nodes as a search from start meets them: the
// first one's offset from start and position.
type stateRun struct {
	key       string
	positions []int
	first     int // position
	offset    int
}

// within counts the state's nodes a search from start over n nodes meets
// in its first k.
func (r stateRun) within(start, k, n int) int {
	below := func(p int) int { i, _ := slices.BinarySearch(r.positions, p); return i }
	if start+k <= n {
		return below(start+k) - below(start)
	}
	return len(r.positions) - below(start) + below(start+k-n)
}

// stateChoice is the node chosen by state, not yet committed, the state
// it was in, and how many nodes of the scan the search examined; ch runs
// the pod's cycle on the node when no placement is copied there.
type stateChoice struct {
	ch        *stateCycle
	node      string
	state     string
	processed int
}

// chooseByState is PlaceBestScanned's search counted state by state: the
// states are judged by the first node of each from the search's start,
// in the order the search meets them, until the states that pass hold the
// scheduler's number of feasible nodes; the states whose first node is
// before that point are scored by that node: a state's nodes score
// alike, so the full path's first of the highest scores is the first
// node of the best state. Nodes outside candidates must be ones that do
// not fit, as PlaceBestScanned asks. ok is false when this cannot be
// exact or decides nothing (no node fits: the full path says why for
// each).
//
// For a pod of a kind (the caller's key of what the scheduler reads of a
// pod; "" for none), a state's verdict and the choice among a list of
// states are remembered: they read nothing but the pod's kind, its
// images, and the states. A pod whose search holds only remembered
// verdicts and choice runs PreFilter and Filter on the chosen node
// alone, which Reserve needs, or none when the placement of a pod of its
// kind on a node in the chosen one's state is copied (learnedCopies).
func (eng *Engine) chooseByState(pod *v1.Pod, kind string, candidates []string, scan *NodeScan) (stateChoice, bool) {
	v := scan.shared
	if v.states == nil || len(candidates) <= maxReps || !eligible(pod, true, true) || !eng.noInterPodTerms() ||
		!eng.claimsUnallocated(pod) {
		return stateChoice{}, false
	}
	clear(v.filtered) // the last cycle's
	ix := &v.index
	ix.refresh(eng, v.states, scan) // every node's class is known from here
	if ix.lone > maxReps || len(ix.at) > maxReps ||
		slices.ContainsFunc(v.states.classes, func(cl *nodeClass) bool { return selectsByName(pod, cl) }) {
		return stateChoice{}, false
	}
	n := len(scan.nodes)
	start := scan.next % n
	runs := make([]stateRun, 0, len(ix.at))
	for key, positions := range ix.at {
		r := stateRun{key: key, positions: positions}
		if i, _ := slices.BinarySearch(positions, start); i < len(positions) {
			r.first, r.offset = positions[i], positions[i]-start
		} else {
			r.first, r.offset = positions[0], positions[0]+n-start
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b stateRun) int { return a.offset - b.offset })
	ch := &stateCycle{eng: eng, v: v, pod: pod, runs: runs, scan: scan}
	if kind != "" && !hasLoneState(runs) {
		ch.kind = kindWithImages(kind, pod)
	}
	// States are judged in the order the search meets them, up to where
	// it stops: a state met after that changes nothing.
	want := eng.numFeasibleNodesToFind(n)
	processed := n
	passing := runs[:0:0]
	total := 0
	for _, r := range runs {
		if r.offset >= processed {
			break
		}
		fits, ok := ch.fits(r)
		if !ok {
			return stateChoice{}, false
		}
		if !fits {
			continue
		}
		passing = append(passing, r)
		if total += len(r.positions); total >= want {
			processed = searchEnd(passing, start, n, want)
		}
	}
	if len(passing) == 0 {
		return stateChoice{}, false
	}
	// Every passing state's first node is before the end: a state met
	// before the end moves it no earlier than its own first node.
	window := passing
	best, ok := ch.best(window)
	if !ok {
		return stateChoice{}, false
	}
	for _, r := range runs {
		v.hits += len(r.positions) - 1
	}
	return stateChoice{ch: ch, node: scan.nodes[window[best].first], state: window[best].key, processed: processed}, true
}

// stateCycle is the scheduling cycle chooseByState runs only when a
// verdict or choice is not remembered: PreFilter for the first node of
// every state.
type stateCycle struct {
	eng  *Engine
	v    *sharedVerdicts
	pod  *v1.Pod
	runs []stateRun
	scan *NodeScan
	// kind keys the memos ("": none).
	kind string
	c    *cycle
	// failed says PreFilter rejected the pod or the cycle may not share.
	failed bool
}

func (ch *stateCycle) cycle() (*cycle, bool) {
	if ch.c == nil && !ch.failed {
		reps := make([]string, len(ch.runs))
		for i, r := range ch.runs {
			reps[i] = ch.scan.nodes[r.first]
		}
		c, _ := ch.eng.begin(ch.pod, reps)
		// The pod's claims as PreFilter made them from their templates
		// must be unallocated still.
		if c == nil || !ch.eng.claimsUnallocated(c.pod) || c.filter != nil && !c.filter.AllNodes() {
			ch.failed = true
			return nil, false
		}
		ch.c = c
	}
	return ch.c, !ch.failed
}

// filtered runs Filter on node in this cycle, once; ok is false when it
// fails there or the cycle cannot run.
func (ch *stateCycle) filtered(node string) (*cycle, bool) {
	c, ok := ch.cycle()
	if !ok {
		return nil, false
	}
	if !ch.v.filtered[node] {
		ch.v.filtered[node] = true
		if rs := ch.eng.filter(c, node); len(rs) > 0 {
			if ch.eng.verify {
				ShortcutDiffers("states by position", "node %s was chosen for pod %s by its state; the scheduler's plugins reject it: %v", node, podKey(ch.pod), rs)
			}
			return nil, false
		}
	}
	return c, true
}

// fits is the state's verdict for the pod.
func (ch *stateCycle) fits(r stateRun) (fits, ok bool) {
	memo := ch.v.verdictOf
	if ch.kind != "" {
		if fits, ok := memo[ch.kind+"\x00"+r.key]; ok {
			return fits, true
		}
	}
	c, ok := ch.cycle()
	if !ok {
		return false, false
	}
	node := ch.scan.nodes[r.first]
	ch.v.filtered[node] = true
	fits = len(ch.eng.filter(c, node)) == 0
	if ch.kind != "" {
		memo[ch.kind+"\x00"+r.key] = fits
	}
	return fits, true
}

// best is the index in window (states in the order the search meets
// them, all passing) of the state the scheduler's scores choose.
func (ch *stateCycle) best(window []stateRun) (int, bool) {
	var key string
	if ch.kind != "" && len(window) > 1 {
		var b strings.Builder
		b.WriteString(ch.kind)
		for _, r := range window {
			b.WriteString("\x01")
			b.WriteString(r.key)
		}
		key = b.String()
		if best, ok := ch.v.choiceOf[key]; ok {
			return best, true
		}
	}
	nodes := make([]fwk.NodeInfo, len(window))
	var c *cycle
	for i, r := range window {
		name := ch.scan.nodes[r.first]
		var ok bool
		if c, ok = ch.filtered(name); !ok { // Score reads what Filter wrote
			return 0, false
		}
		nodes[i] = ch.eng.snap.NodeInfo(name)
	}
	best, ok := ch.eng.scoreBest(c, nodes, true)
	if ok && key != "" {
		ch.v.choiceOf[key] = best
	}
	return best, ok
}

// hasLoneState reports whether a node without a state is in the search:
// it is keyed by its name, which stays as the node fills, so nothing is
// remembered for such a search.
func hasLoneState(runs []stateRun) bool {
	return slices.ContainsFunc(runs, func(r stateRun) bool { return r.key[0] == 0 })
}

// kindWithImages is the memos' key of a pod: its kind and its
// containers' images, which ImageLocality scores.
func kindWithImages(kind string, pod *v1.Pod) string {
	var b strings.Builder
	b.WriteString(kind)
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			b.WriteString("\x00")
			b.WriteString(cs[i].Image)
		}
	}
	return b.String()
}

// searchEnd is how many nodes a search from start over n nodes examines
// before it has met want nodes of the passing states (as many as there
// are).
func searchEnd(passing []stateRun, start, n, want int) int {
	return min(n, 1+sort.Search(n, func(k int) bool {
		met := 0
		for _, r := range passing {
			met += r.within(start, k+1, n)
		}
		return met >= want
	}))
}
