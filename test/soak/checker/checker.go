// Package checker is the soak's judge: a pure function over what the
// soak observed (API objects as its informers saw them, the API server's
// audit records of who deleted what, and the faults it drove), so each
// invariant can be made to fail in a unit test with a few hand-made
// observations and no cluster.
//
// The evictability rules are written out here from CA's documented
// contract, not taken from the autoscaler's own code: a judge that shared
// the code under test could not catch its mistakes.
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Invariant names one property the checker holds the autoscaler to.
type Invariant string

// The invariants, in the order the summary prints them.
const (
	PodDeletionAllowed   Invariant = "pod-deletion-allowed"
	NodeRemovalEvictable Invariant = "node-removal-evictable"
	GroupWithinMax       Invariant = "group-within-max"
	GroupAtLeastMin      Invariant = "group-at-least-min"
	NoScaleUpWithRoom    Invariant = "no-scale-up-with-room"
	ScaleUpWithinPending Invariant = "scale-up-within-pending"
	PendingBounded       Invariant = "pending-bounded"
	DeletionTaintCleared Invariant = "deletion-taint-cleared"
	NoPanic              Invariant = "no-panic"
	HealthyWhileLeading  Invariant = "health-check-while-leader-healthy"
)

// Invariants lists every invariant.
func Invariants() []Invariant {
	return []Invariant{PodDeletionAllowed, NodeRemovalEvictable, GroupWithinMax, GroupAtLeastMin,
		NoScaleUpWithRoom, ScaleUpWithinPending, PendingBounded, DeletionTaintCleared, NoPanic, HealthyWhileLeading}
}

// CA's annotations and taint, as users and CA's FAQ name them.
const (
	SafeToEvictAnnotation             = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	SafeToEvictLocalVolumesAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	ToBeDeletedTaint                  = "ToBeDeletedByClusterAutoscaler"
)

// Group is a node group as the soak configured it.
type Group struct {
	Name     string
	Min, Max int
	// Faulty groups (creates failing for a while, nodes never Ready) are
	// never counted as able to take a pending pod.
	Faulty bool
}

// Config is what the checker knows of the setup.
type Config struct {
	Groups []Group
	// GroupLabel is the node label naming a node's group.
	GroupLabel string
	// AutoscalerUser is the user the autoscaler's API calls are audited as.
	AutoscalerUser string
	// Demand is what a pod needs of a node, in the soak's own units.
	Demand func(pod *v1.Pod) map[string]int64
	// Capacity is what a node of the group offers; devices published
	// through ResourceSlices count only once published.
	Capacity func(group string, slicesPublished bool) map[string]int64

	ScanInterval     time.Duration
	ProvisionTimeout time.Duration
	// NodeStartup covers a new node's way from created to taking a pod:
	// Ready delay, slices delay, the scheduler's binding.
	NodeStartup time.Duration
	// Settle is how long a state must hold before the autoscaler is
	// expected to have seen it (informer lag and one loop).
	Settle time.Duration
	// RestartGrace is how long a new leader has to clear the deletion
	// taints its predecessor left.
	RestartGrace time.Duration
	// StartupGrace is how long a started replica may fail /health-check.
	StartupGrace time.Duration
	// Resync: after a disruption ends (an API server restart) the soak's
	// own informers may still be relisting, so the autoscaler's scale-ups
	// are not judged against the soak's view for this long.
	Resync time.Duration
	// LeaderActiveWithin: the leader is healthy while its status
	// ConfigMap was written this recently.
	LeaderActiveWithin time.Duration
}

// Kind says what an Observation carries.
type Kind int

// Observation kinds.
const (
	PodUpdate       Kind = iota // Pod
	PodDelete                   // Name (namespace/name)
	NodeUpdate                  // Node
	NodeDelete                  // Name
	SlicesPublished             // Name (node), Count (slices of the node)
	PDBUpdate                   // PDB
	APICall                     // Call, from the audit log
	ScaleUpEvent                // Name (pod namespace/name): a TriggeredScaleUp event
	DisruptionStart             // Name (what the soak did)
	DisruptionEnd               // Name
	NewLeader                   // Name (holder identity)
	LeaderActivity              // the leader wrote its status
	HealthProbe                 // Probe
	AutoscalerLog               // Name (replica), Text
	Tick                        // time passes
)

// Call is one audited API request.
type Call struct {
	User, Verb, Resource, Subresource, Namespace, Name string
	Code                                               int
}

// Probe is one /health-check answer of a replica.
type Probe struct {
	Replica string
	OK      bool
	Detail  string
	// Age is how long the replica's process has been running.
	Age time.Duration
}

// Observation is one thing the soak saw, at Time.
type Observation struct {
	Time  time.Time
	Kind  Kind
	Pod   *v1.Pod
	Node  *v1.Node
	PDB   *policyv1.PodDisruptionBudget
	Call  *Call
	Probe *Probe
	Name  string
	Text  string
	Count int
}

// Violation is one broken invariant.
type Violation struct {
	Time      time.Time
	Invariant Invariant
	Message   string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s: %s", v.Time.Format("15:04:05.000"), v.Invariant, v.Message)
}

type podState struct {
	pod          *v1.Pod
	gone         bool
	goneAt       time.Time
	pendingSince time.Time // zero unless pending
	boundAt      time.Time
	waitStart    time.Time // start of the pending window judged by PendingBounded
	reported     bool
	counted      bool // PendingBounded counted this pod's wait
}

type nodeState struct {
	node         *v1.Node
	gone         bool
	readySince   time.Time
	slicesSince  time.Time
	lastChange   time.Time // pods bound, readiness, taints
	taintedSince time.Time
	// evicted are pods the autoscaler deleted or evicted from this node.
	evicted []string
}

type taintCheck struct {
	node     string
	since    time.Time
	deadline time.Time
}

type creation struct {
	at          time.Time
	group, name string
}

// Checker holds the state built from observations so far.
type Checker struct {
	cfg        Config
	now        time.Time
	pods       map[string]*podState
	nodes      map[string]*nodeState
	pdbs       map[string]*policyv1.PodDisruptionBudget
	disrupted  map[string]int
	lastCalm   time.Time // end of the last disruption
	lastActive time.Time // last status write of a leader
	taints     []taintCheck
	toJudge    []creation // node creations judged once Settle has passed
	restarts   int
	followed   int
	creations  []creation
	counts     map[Invariant]int
	violations []Violation
}

// New returns a checker for the setup.
func New(cfg Config) *Checker {
	return &Checker{cfg: cfg, pods: map[string]*podState{}, nodes: map[string]*nodeState{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, disrupted: map[string]int{}, counts: map[Invariant]int{}}
}

// Run is the checker as one function: every violation of the observations.
func Run(cfg Config, obs []Observation) ([]Violation, map[Invariant]int) {
	c := New(cfg)
	for _, o := range obs {
		c.Observe(o)
	}
	return c.Violations(), c.Counts()
}

// Violations returns every violation found so far.
func (c *Checker) Violations() []Violation { return append([]Violation(nil), c.violations...) }

// Counts returns how many times each invariant was checked.
func (c *Checker) Counts() map[Invariant]int {
	out := map[Invariant]int{}
	for _, inv := range Invariants() {
		out[inv] = c.counts[inv]
	}
	return out
}

// Summary is one line per invariant: checks made and violations.
func (c *Checker) Summary() string {
	bad := map[Invariant]int{}
	for _, v := range c.violations {
		bad[v.Invariant]++
	}
	var b strings.Builder
	for _, inv := range Invariants() {
		fmt.Fprintf(&b, "  %-36s checked %6d  violations %d", inv, c.counts[inv], bad[inv])
		if inv == DeletionTaintCleared {
			fmt.Fprintf(&b, "  (%d leader changes, %d tainted nodes followed)", c.restarts, c.followed)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (c *Checker) fail(inv Invariant, format string, args ...any) {
	c.violations = append(c.violations, Violation{Time: c.now, Invariant: inv, Message: fmt.Sprintf(format, args...)})
}

// Observe takes one observation and returns the violations it revealed.
func (c *Checker) Observe(o Observation) []Violation {
	before := len(c.violations)
	if o.Time.After(c.now) {
		c.now = o.Time
	}
	switch o.Kind {
	case PodUpdate:
		c.podUpdate(o.Pod)
	case PodDelete:
		c.podGone(o.Name)
	case NodeUpdate:
		c.nodeUpdate(o.Node)
	case NodeDelete:
		c.nodeGone(o.Name)
	case SlicesPublished:
		if n := c.nodes[o.Name]; n != nil && o.Count > 0 && n.slicesSince.IsZero() {
			n.slicesSince = c.now
		}
	case PDBUpdate:
		c.pdbs[o.PDB.Namespace+"/"+o.PDB.Name] = o.PDB
	case APICall:
		c.apiCall(o.Call)
	case ScaleUpEvent:
		c.scaleUp(o.Name)
	case DisruptionStart:
		c.disrupted[o.Name]++
	case DisruptionEnd:
		if c.disrupted[o.Name] > 0 {
			c.disrupted[o.Name]--
		}
		c.lastCalm = c.now
	case NewLeader:
		c.newLeader()
	case LeaderActivity:
		c.lastActive = c.now
	case HealthProbe:
		c.probe(o.Probe)
	case AutoscalerLog:
		c.scanLog(o.Name, o.Text)
	}
	c.tick()
	return c.violations[before:]
}

func (c *Checker) disruptedNow() bool {
	for _, n := range c.disrupted {
		if n > 0 {
			return true
		}
	}
	return false
}

func key(obj metav1.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

func (c *Checker) podUpdate(p *v1.Pod) {
	k := key(p)
	s := c.pods[k]
	if s == nil || s.pod.UID != p.UID {
		s = &podState{}
		c.pods[k] = s
	}
	old := s.pod
	s.pod, s.gone = p, false
	if old == nil || old.Spec.NodeName != p.Spec.NodeName || terminal(old) != terminal(p) {
		c.touchNode(p.Spec.NodeName)
		if old != nil {
			c.touchNode(old.Spec.NodeName)
		}
	}
	switch {
	case p.Spec.NodeName == "" && p.DeletionTimestamp == nil && !terminal(p):
		if s.pendingSince.IsZero() {
			s.pendingSince = c.now
		}
	default:
		c.endWait(s)
		if p.Spec.NodeName != "" && s.boundAt.IsZero() {
			s.boundAt = c.now
		}
	}
}

// endWait counts a pending pod's wait as judged, once.
func (c *Checker) endWait(s *podState) {
	if !s.pendingSince.IsZero() && !s.counted {
		s.counted = true
		c.counts[PendingBounded]++
	}
	s.pendingSince, s.waitStart = time.Time{}, time.Time{}
}

func (c *Checker) podGone(k string) {
	s := c.pods[k]
	if s == nil || s.gone {
		return
	}
	s.gone, s.goneAt = true, c.now
	c.endWait(s)
	c.touchNode(s.pod.Spec.NodeName)
}

func (c *Checker) touchNode(name string) {
	if n := c.nodes[name]; name != "" && n != nil {
		n.lastChange = c.now
	}
}

func ready(n *v1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *v1.Node, k string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == k {
			return true
		}
	}
	return false
}

func taintKeys(n *v1.Node) string {
	var keys []string
	for _, t := range n.Spec.Taints {
		keys = append(keys, t.Key+":"+string(t.Effect))
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (c *Checker) groupOf(n *v1.Node) string { return n.Labels[c.cfg.GroupLabel] }

func (c *Checker) group(name string) (Group, bool) {
	for _, g := range c.cfg.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return Group{}, false
}

// groupByNodeName finds a group from a node's name (group-N), for audit
// records, which carry no labels.
func (c *Checker) groupByNodeName(node string) string {
	best := ""
	for _, g := range c.cfg.Groups {
		if strings.HasPrefix(node, g.Name+"-") && len(g.Name) > len(best) {
			best = g.Name
		}
	}
	return best
}

func (c *Checker) live(group string) int {
	n := 0
	for _, s := range c.nodes {
		if !s.gone && c.groupOf(s.node) == group {
			n++
		}
	}
	return n
}

func (c *Checker) nodeUpdate(n *v1.Node) {
	s := c.nodes[n.Name]
	fresh := s == nil || s.gone || s.node.UID != n.UID
	if fresh {
		s = &nodeState{lastChange: c.now}
		c.nodes[n.Name] = s
	}
	old := s.node
	s.node = n
	if ready(n) && s.readySince.IsZero() {
		s.readySince = c.now
	}
	if !ready(n) {
		s.readySince = time.Time{}
	}
	if old == nil || ready(old) != ready(n) || taintKeys(old) != taintKeys(n) || old.Spec.Unschedulable != n.Spec.Unschedulable {
		s.lastChange = c.now
	}
	if hasTaint(n, ToBeDeletedTaint) {
		if s.taintedSince.IsZero() {
			s.taintedSince = c.now
		}
	} else {
		s.taintedSince = time.Time{}
	}
	if fresh {
		g := c.groupOf(n)
		if grp, ok := c.group(g); ok {
			c.counts[GroupWithinMax]++
			if live := c.live(g); live > grp.Max {
				c.fail(GroupWithinMax, "group %s has %d nodes with %s, above its max %d", g, live, n.Name, grp.Max)
			}
		}
	}
}

func (c *Checker) nodeGone(name string) {
	if s := c.nodes[name]; s != nil {
		s.gone = true
	}
}

func (c *Checker) apiCall(call *Call) {
	if call.User != c.cfg.AutoscalerUser || call.Code < 200 || call.Code > 299 {
		return
	}
	switch {
	case call.Resource == "pods" && (call.Verb == "delete" && call.Subresource == "" ||
		call.Verb == "create" && call.Subresource == "eviction"):
		c.counts[PodDeletionAllowed]++
		k := call.Namespace + "/" + call.Name
		s := c.pods[k]
		if s == nil {
			c.fail(PodDeletionAllowed, "autoscaler removed pod %s the soak never saw", k)
			return
		}
		if why := c.nonEvictable(s.pod); why != "" {
			c.fail(PodDeletionAllowed, "autoscaler removed pod %s (%s, node %s): %s", k, call.Verb, s.pod.Spec.NodeName, why)
		}
		if n := c.nodes[s.pod.Spec.NodeName]; n != nil {
			n.evicted = append(n.evicted, k)
		}
		c.podGone(k)
	case call.Resource == "nodes" && call.Verb == "delete":
		c.nodeRemoved(call.Name)
	case call.Resource == "nodes" && call.Verb == "create":
		c.nodeCreated(call.Name)
	}
}

func (c *Checker) nodeRemoved(name string) {
	c.counts[NodeRemovalEvictable]++
	s := c.nodes[name]
	if s == nil {
		// Never seen: created and removed within the informer's lag, so
		// it held no pod.
		return
	}
	var bad []string
	seen := map[string]bool{}
	for _, k := range s.evicted {
		seen[k] = true
		if why := c.nonEvictable(c.pods[k].pod); why != "" {
			bad = append(bad, k+": "+why)
		}
	}
	for k, p := range c.pods {
		if !p.gone && p.pod.Spec.NodeName == name && !seen[k] {
			if why := c.nonEvictable(p.pod); why != "" {
				bad = append(bad, k+": "+why)
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		c.fail(NodeRemovalEvictable, "autoscaler removed node %s holding non-evictable pods: %s", name, strings.Join(bad, "; "))
	}
	g := c.groupOf(s.node)
	s.gone = true
	if grp, ok := c.group(g); ok {
		c.counts[GroupAtLeastMin]++
		if live := c.live(g); live < grp.Min {
			c.fail(GroupAtLeastMin, "autoscaler removed node %s: group %s left with %d nodes, below its min %d", name, g, live, grp.Min)
		}
	}
}

// viewStale says the soak's own view may lag the cluster's: during a
// disruption and for Resync after it.
func (c *Checker) viewStale() bool {
	return c.disruptedNow() || (!c.lastCalm.IsZero() && c.now.Sub(c.lastCalm) < c.cfg.Resync)
}

func (c *Checker) newLeader() {
	c.restarts++
	for name, n := range c.nodes {
		if !n.gone && !n.taintedSince.IsZero() && n.taintedSince.Before(c.now) {
			c.followed++
			c.taints = append(c.taints, taintCheck{node: name, since: n.taintedSince, deadline: c.now.Add(c.cfg.RestartGrace)})
		}
	}
	c.counts[DeletionTaintCleared]++
}

func (c *Checker) probe(p *Probe) {
	if c.disruptedNow() || p.Age < c.cfg.StartupGrace || c.now.Sub(c.lastCalm) < c.cfg.StartupGrace {
		return
	}
	c.counts[HealthyWhileLeading]++
	leaderHealthy := !c.lastActive.IsZero() && c.now.Sub(c.lastActive) <= c.cfg.LeaderActiveWithin
	if !p.OK && leaderHealthy {
		c.fail(HealthyWhileLeading, "replica %s /health-check failed (%s) while the leader wrote its status %s ago",
			p.Replica, p.Detail, c.now.Sub(c.lastActive).Round(time.Millisecond))
	}
}

// panicLine reports a line the Go runtime or apimachinery's crash
// handler writes on a panic or a fatal error.
func panicLine(line string) bool {
	line = strings.TrimSpace(line)
	return strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") ||
		strings.Contains(line, "Observed a panic")
}

func (c *Checker) scanLog(replica, text string) {
	c.counts[NoPanic]++
	for _, line := range strings.Split(text, "\n") {
		if panicLine(line) {
			c.fail(NoPanic, "replica %s log: %s", replica, line)
			return
		}
	}
}

// tick runs the time-based checks.
func (c *Checker) tick() {
	judge := c.toJudge[:0]
	for _, cr := range c.toJudge {
		if c.now.Sub(cr.at) < c.cfg.Settle {
			judge = append(judge, cr)
			continue
		}
		c.judgeCreation(cr)
	}
	c.toJudge = judge
	recent := c.creations[:0]
	for _, cr := range c.creations {
		if c.now.Sub(cr.at) <= 10*c.cfg.ScanInterval+c.cfg.Settle {
			recent = append(recent, cr)
		}
	}
	c.creations = recent

	kept := c.taints[:0]
	for _, tc := range c.taints {
		if c.now.Before(tc.deadline) {
			kept = append(kept, tc)
			continue
		}
		n := c.nodes[tc.node]
		if n != nil && !n.gone && n.taintedSince.Equal(tc.since) {
			c.fail(DeletionTaintCleared, "node %s still carries %s, set %s before a new leader took over, %s after",
				tc.node, ToBeDeletedTaint, tc.since.Format("15:04:05"), c.cfg.RestartGrace)
		}
	}
	c.taints = kept

	bound := c.cfg.ProvisionTimeout + 2*c.cfg.ScanInterval + c.cfg.NodeStartup
	calm := !c.disruptedNow()
	for k, s := range c.pods {
		if s.gone || s.pendingSince.IsZero() || s.reported {
			continue
		}
		if !calm || !c.someGroupCouldTake(s.pod) {
			s.waitStart = time.Time{}
			continue
		}
		if s.waitStart.IsZero() {
			s.waitStart = c.now
			if s.pendingSince.After(c.lastCalm) {
				// Judged from its creation when no disruption came between.
				s.waitStart = s.pendingSince
			}
		}
		if waited := c.now.Sub(s.waitStart); waited > bound {
			s.reported = true
			if !s.counted {
				s.counted = true
				c.counts[PendingBounded]++
			}
			c.fail(PendingBounded, "pod %s pending %s (bound %s) while a group could take it", k, waited.Round(time.Second), bound)
		}
	}
}
