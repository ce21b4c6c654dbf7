package clusterstate

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	nodeutil "k8s.io/component-helpers/node/util"

	"draxr.dev/draxr/autoscaler/backoff"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/taints"
	"draxr.dev/draxr/simulator/view"
)

// CA's defaults for the readiness and health flags.
const (
	DefaultMaxNodeProvisionTime      = 15 * time.Minute
	DefaultMaxNodeStartupTime        = 15 * time.Minute
	DefaultOkTotalUnreadyCount       = 3
	DefaultMaxTotalUnreadyPercentage = 45.0
)

// maxStatusSettingDelayAfterCreation is how soon after creation a new
// node reports its first NotReady (CA's constant): a NotReady condition
// set later means the node was Ready once and broke, not that it is still
// starting.
const maxStatusSettingDelayAfterCreation = 2 * time.Minute

// Event reasons, CA's names; they are recorded on the status ConfigMap.
const (
	EventScaleUpTimedOut          = "ScaleUpTimedOut"
	EventFailedToRevertScaleUp    = "FailedToRevertScaleUp"
	EventScaleUpFailed            = "ScaleUpFailed"
	EventFailedToScaleUpGroup     = "FailedToScaleUpGroup"
	EventDeleteUnregistered       = "DeleteUnregistered"
	EventDeleteUnregisteredFailed = "DeleteUnregisteredFailed"
	EventClusterUnhealthy         = "ClusterUnhealthy"
	// EventInvalidTemplate: a group's template ResourceSlices are broken;
	// the group is left out of scale-up.
	EventInvalidTemplate = "InvalidNodeGroupTemplate"
)

// Backoff error codes, CA's.
const (
	CodeTimeout = "timeout"
)

// RegistryConfig are the readiness and health rules (CA's flags). A zero
// duration disables that limit.
type RegistryConfig struct {
	MaxNodeProvisionTime      time.Duration
	MaxNodeStartupTime        time.Duration
	OkTotalUnreadyCount       int
	MaxTotalUnreadyPercentage float64
	// Backoff keeps failed groups out of scale-up; nil disables it.
	Backoff *backoff.Backoff
	// Recorder and EventObject (the status ConfigMap) receive the
	// cluster-level events; nil records none.
	Recorder    record.EventRecorder
	EventObject runtime.Object
	// BypassedSchedulerNames (CA's --bypassed-scheduler-names): their
	// pending pods count as unschedulable before any scheduler marked
	// them so, as CA counts them.
	BypassedSchedulerNames []string
	// Taints names the startup taints (--startup-taint,
	// --startup-taint-prefix) on CA's built-in ones: a node carrying one
	// is still starting.
	Taints taints.Config
	// BindingTimeout is how long the scheduler waits for device binding
	// conditions (its DynamicResources bindingTimeout); 0: the default.
	BindingTimeout time.Duration
	// Prices asks the provider each group's node price (for
	// --expander=price); off, no provider is asked, as CA asks only for
	// its price expander.
	Prices bool
}

// Registry is the cluster state that must survive between loops: the
// scale-ups in flight and since when instances have been unregistered.
// It is used by the loop's goroutine only.
type Registry struct {
	cfg               RegistryConfig
	scaleUps          map[string]*scaleUpRequest
	unregisteredSince map[string]map[string]time.Time // group -> provider ID -> first seen
	// labels are each group's metric labels, from its last template.
	labels map[string]metrics.GroupLabels
	// templateErrs are the groups' template problems already reported.
	templateErrs map[string]string
	// carried is what the last loop read that the next may reuse.
	carried carried
}

type scaleUpRequest struct {
	increase int
	at       time.Time
	// last is the latest increase: the group's --max-node-provision-time
	// runs from there.
	last time.Time
}

// NewRegistry returns an empty registry.
func NewRegistry(cfg RegistryConfig) *Registry {
	return &Registry{cfg: cfg, scaleUps: map[string]*scaleUpRequest{}, unregisteredSince: map[string]map[string]time.Time{},
		labels: map[string]metrics.GroupLabels{}, templateErrs: map[string]string{}}
}

// RegisterScaleUp records that group was asked for delta more nodes: they
// must register and turn Ready within the group's max node provision time.
func (r *Registry) RegisterScaleUp(group string, delta int, now time.Time) {
	req := r.scaleUps[group]
	if req == nil {
		req = &scaleUpRequest{at: now}
		r.scaleUps[group] = req
	}
	req.increase += delta
	req.last = now
}

// ScaleUpInProgress says whether group has nodes asked for that have not
// all come up yet.
func (r *Registry) ScaleUpInProgress(group string) bool { return r.scaleUps[group] != nil }

// Labels are group's metric labels (CA's GPU and DRA ones).
func (r *Registry) Labels(group string) metrics.GroupLabels { return r.labels[group] }

// RegisterFailedScaleUp backs group off after its IncreaseSize failed and
// returns when the backoff ends.
func (r *Registry) RegisterFailedScaleUp(group string, err error, now time.Time) time.Time {
	r.event(v1.EventTypeWarning, EventFailedToScaleUpGroup, "Scale-up failed for group %s: %v", group, err)
	return r.BackOff(group, backoff.Reason{Class: cloudprovider.ClassOf(err), Code: cloudprovider.CodeOf(err), Message: err.Error()}, now)
}

// BackoffStatus says whether group is backed off at now.
func (r *Registry) BackoffStatus(group string, now time.Time) backoff.Status {
	if r.cfg.Backoff == nil {
		return backoff.Status{}
	}
	return r.cfg.Backoff.Status(group, now)
}

// BackOff keeps group out of scale-up for reason and returns when the
// backoff ends.
func (r *Registry) BackOff(group string, reason backoff.Reason, now time.Time) time.Time {
	metrics.RegisterFailedScaleUp(reason.Code, r.labels[group])
	if r.cfg.Backoff == nil {
		return now
	}
	return r.cfg.Backoff.Backoff(group, reason, now)
}

// Event records a cluster-level event (on the status ConfigMap).
func (r *Registry) Event(typ, reason, format string, args ...any) {
	r.event(typ, reason, format, args...)
}

func (r *Registry) event(typ, reason, format string, args ...any) {
	if r.cfg.Recorder != nil && r.cfg.EventObject != nil {
		r.cfg.Recorder.Eventf(r.cfg.EventObject, typ, reason, format, args...)
	}
}

// Assessment is the registry's reading of one loop: what it recommends
// about nodes that did not come up (Actions, for the loop to apply), and
// what State needs to build the loop's state once they are applied.
type Assessment struct {
	Actions []Action

	st         *State
	groups     []*groupAssessment
	listers    view.View
	registered int
	now        time.Time
}

// groupAssessment is one group's reading; its actions are
// Actions[first:end].
type groupAssessment struct {
	ng         cloudprovider.NodeGroup
	g          *nodegroup.NodeGroup // nil when the group cannot be planned
	nodes      []*v1.Node
	states     map[string]nodeState
	slicesOf   map[string]int
	namePrefix string
	target     int // as it will be if the actions succeed
	first, end int
	rd         Readiness
}

// Assess reads the listers and the provider and classifies every group's
// nodes and instances. It writes nothing to the cloud: what should be
// done about instances in error, nodes that never turned Ready and
// scale-ups that timed out comes back as Actions. A provider error about
// one node or group is recorded in the state's Errors; only the listers
// failing stops it.
func (r *Registry) Assess(l view.View, provider cloudprovider.Provider, now time.Time) (*Assessment, error) {
	if r.cfg.Backoff != nil {
		r.cfg.Backoff.RemoveStale(now)
	}
	st := &State{Objects: &input.Objects{}, Upcoming: map[string]int{}, Ready: map[string]bool{}, GroupOf: map[string]string{},
		GroupReadiness: map[string]Readiness{}, GroupHealthy: map[string]bool{}, NotForScaleUp: map[string]string{}, Healthy: true}
	as := &Assessment{st: st, listers: l, now: now}
	all := labels.Everything()
	slices, err := l.Slices.List(all)
	if err != nil {
		return nil, err
	}
	slicesOf := map[string]int{}
	for _, s := range slices {
		if s.Spec.NodeName != nil {
			slicesOf[*s.Spec.NodeName]++
		}
		st.Objects.ResourceSlices = append(st.Objects.ResourceSlices, s)
	}
	nodes, err := l.Nodes.List(all)
	if err != nil {
		return nil, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	nodesOf := map[string][]*v1.Node{}
	for _, n := range nodes {
		ng, err := provider.NodeGroupForNode(n)
		if err != nil {
			// Not knowing its group, never touch it and plan without it.
			st.Errors = append(st.Errors, fmt.Errorf("node %s: node group: %w", n.Name, err))
			continue
		}
		as.registered++
		if ng == nil {
			if isReady(n, r.cfg.Taints) {
				st.Objects.Nodes = append(st.Objects.Nodes, n)
				st.Ready[n.Name] = true
				st.Readiness.Ready++
			} else {
				st.Readiness.Unready++
			}
			continue
		}
		nodesOf[ng.Id()] = append(nodesOf[ng.Id()], n)
	}
	live := map[string]bool{}
	groups := provider.NodeGroups()
	ids := make([]string, len(groups))
	for i, ng := range groups {
		ids[i] = ng.Id()
	}
	prefixes := nodegroup.NodeNamePrefixes(ids)
	for _, ng := range groups {
		live[ng.Id()] = true
		r.assessGroup(as, ng, nodesOf[ng.Id()], slicesOf, prefixes[ng.Id()])
	}
	for g := range r.scaleUps {
		if !live[g] {
			delete(r.scaleUps, g)
		}
	}
	for g := range r.labels {
		if !live[g] {
			delete(r.labels, g)
		}
	}
	for g := range r.templateErrs {
		if !live[g] {
			delete(r.templateErrs, g)
		}
	}
	return as, nil
}

// State is the loop's state after as's actions: what an applied action
// gave up on is left out, a failed one is in Errors, and one not applied
// (an explanation, not a loop) changed nothing.
func (r *Registry) State(as *Assessment) (*State, error) {
	st := as.st
	for _, ga := range as.groups {
		rd := r.finishGroup(as, ga)
		id := ga.ng.Id()
		st.GroupReadiness[id] = rd
		st.Readiness.Ready += rd.Ready
		st.Readiness.Unready += rd.Unready
		st.Readiness.ResourceUnready += rd.ResourceUnready
		st.Readiness.NotStarted += rd.NotStarted
		st.Readiness.Unregistered += rd.Unregistered
		st.Readiness.LongUnregistered += rd.LongUnregistered
	}
	st.Healthy = r.healthy(st.Readiness.Unready, as.registered)
	wait := input.BindingWait{Now: as.now, Timeout: cmp.Or(r.cfg.BindingTimeout, input.DefaultBindingTimeout)}
	if err := st.addPods(as.listers, r.cfg.BypassedSchedulerNames, wait, &r.carried); err != nil {
		return nil, err
	}
	if err := st.addDRA(as.listers); err != nil {
		return st, err
	}
	st.Gangs = st.Objects.Gangs(r.cfg.BypassedSchedulerNames, st.AllPods)
	return st, nil
}

// healthy is CA's rule: too many unready nodes, by count and by share.
func (r *Registry) healthy(unready, total int) bool {
	return unready <= r.cfg.OkTotalUnreadyCount || float64(unready) <= r.cfg.MaxTotalUnreadyPercentage/100*float64(total)
}

// nodeState is a registered node's readiness.
type nodeState int

const (
	nodeReady nodeState = iota
	nodeNotStarted
	nodeStartupTimedOut // NotReady since it registered, for too long
	nodeUnready
	nodeResourceUnready // Ready, devices never published, for too long
)

// groupOptions are ng's provision and start-up limits: the flags, or the
// group's own (GetOptions); a group that cannot tell gets the flags and
// the error is the loop's to report.
func (r *Registry) groupOptions(ng cloudprovider.NodeGroup) (cloudprovider.NodeGroupOptions, error) {
	o, err := cloudprovider.OptionsOf(ng, cloudprovider.NodeGroupOptions{
		MaxNodeProvisionTime: r.cfg.MaxNodeProvisionTime, MaxNodeStartupTime: r.cfg.MaxNodeStartupTime})
	if err != nil {
		err = fmt.Errorf("node group %s: options: %w (the flags apply)", ng.Id(), err)
	}
	return o, err
}

func (r *Registry) nodeState(n *v1.Node, devicesPublished bool, maxStartup time.Duration, now time.Time) nodeState {
	_, cond := nodeutil.GetNodeCondition(&n.Status, v1.NodeReady)
	ready := cond != nil && cond.Status == v1.ConditionTrue
	held := r.cfg.Taints.HoldsBack(n)
	if ready && !held && devicesPublished {
		return nodeReady
	}
	age := now.Sub(n.CreationTimestamp.Time)
	startupOver := maxStartup > 0 && age >= maxStartup
	if ready { // held back by a taint or condition, or waiting for its DRA drivers' ResourceSlices
		switch {
		case !startupOver:
			return nodeNotStarted
		case held:
			return nodeUnready
		}
		return nodeResourceUnready
	}
	neverReady := cond == nil || cond.LastTransitionTime.Sub(n.CreationTimestamp.Time) < maxStatusSettingDelayAfterCreation
	switch {
	case !neverReady:
		return nodeUnready
	case startupOver:
		return nodeStartupTimedOut
	}
	return nodeNotStarted
}

// assessGroup classifies the group's nodes and instances and appends the
// actions for those that failed to come up. Decisions further down assume
// the earlier actions succeed (a node being deleted is not waited for);
// finishGroup counts what really happened.
func (r *Registry) assessGroup(as *Assessment, ng cloudprovider.NodeGroup, nodes []*v1.Node, slicesOf map[string]int, namePrefix string) {
	ga := &groupAssessment{ng: ng, nodes: nodes, slicesOf: slicesOf, namePrefix: namePrefix, first: len(as.Actions)}
	as.groups = append(as.groups, ga)
	c := &groupCheck{r: r, as: as, ga: ga, ng: ng, id: ng.Id(), givenUp: map[string]bool{}}
	c.planningGroup()
	c.classify()
	c.failedInstances()
	c.startupTimedOut()
	c.scaleUpInFlight()
	c.longUnregistered()
	ga.end = len(as.Actions)
}

// groupCheck is one group's assessment in progress: each step adds the
// actions for one way nodes fail to come up.
type groupCheck struct {
	r  *Registry
	as *Assessment
	ga *groupAssessment
	ng cloudprovider.NodeGroup
	id string

	opts cloudprovider.NodeGroupOptions
	// failed and unregistered are instances without a registered node,
	// in error or not.
	failed, unregistered []cloudprovider.Instance
	// since is when each unregistered instance was first seen.
	since map[string]time.Time
	// givenUp are the node names and provider IDs the actions give up.
	givenUp map[string]bool
	// deleted counts, of the target size, what DeleteNodes takes off.
	deleted int
	// target is the target size less what the actions delete.
	target    int
	targetErr error
}

func (c *groupCheck) recommend(a Action) {
	a.Group = c.ng
	c.as.Actions = append(c.as.Actions, a)
}

func (c *groupCheck) fail(err error) {
	c.as.st.Errors = append(c.as.st.Errors, fmt.Errorf("node group %s: %w", c.id, err))
}

// planningGroup reads the group as the planner sees it and its options;
// a broken template is reported once per problem.
func (c *groupCheck) planningGroup() {
	st, r, id := c.as.st, c.r, c.id
	g, err := PlanningGroup(c.ng)
	if err != nil {
		st.Errors = append(st.Errors, err)
		st.NotForScaleUp[id] = err.Error()
		if te := (*TemplateError)(nil); errors.As(err, &te) {
			if r.templateErrs[id] != err.Error() { // once per problem, not every loop
				c.recommend(emit(v1.EventTypeWarning, EventInvalidTemplate, err.Error()))
			}
			r.templateErrs[id] = err.Error()
		}
	} else {
		delete(r.templateErrs, id)
		if r.cfg.Prices {
			if err := withPrice(g, c.ng); err != nil {
				st.Errors = append(st.Errors, err)
			}
		}
		st.Groups = append(st.Groups, g)
		r.labels[id] = MetricLabels(g)
	}
	c.ga.g = g
	opts, err := r.groupOptions(c.ng)
	if err != nil {
		st.Errors = append(st.Errors, err)
	}
	c.opts = opts
}

// classify gives each node its state and sorts the instances without a
// node into failed and unregistered, remembering when each unregistered
// one was first seen.
func (c *groupCheck) classify() {
	ga, g := c.ga, c.ga.g
	byProviderID := map[string]bool{}
	byName := map[string]bool{}
	ga.states = map[string]nodeState{}
	for _, n := range ga.nodes {
		byProviderID[n.Spec.ProviderID] = n.Spec.ProviderID != ""
		byName[n.Name] = true
		ga.states[n.Name] = c.r.nodeState(n, g == nil || len(g.Spec.ResourceSlices) == 0 || ga.slicesOf[n.Name] > 0, c.opts.MaxNodeStartupTime, c.as.now)
	}
	instances, err := c.ng.Nodes()
	if err != nil {
		c.fail(fmt.Errorf("list instances: %w", err))
	}
	seen := map[string]bool{}
	for _, in := range instances {
		if byProviderID[in.ProviderID] || (in.NodeName != "" && byName[in.NodeName]) {
			continue
		}
		seen[in.ProviderID] = true
		if in.Status != nil && in.Status.ErrorInfo != nil {
			c.failed = append(c.failed, in)
			continue
		}
		c.unregistered = append(c.unregistered, in)
	}
	c.since = c.r.unregisteredSince[c.id]
	if c.since == nil {
		c.since = map[string]time.Time{}
		c.r.unregisteredSince[c.id] = c.since
	}
	for pid := range c.since {
		if !seen[pid] {
			delete(c.since, pid)
		}
	}
}

// giveUpNodes recommends kind for the nodes not given up yet.
func (c *groupCheck) giveUpNodes(kind ActionKind, ns []*v1.Node, what string) {
	var todo []*v1.Node
	var keys []string
	for _, n := range ns {
		if !c.givenUp[n.Name] {
			todo = append(todo, n)
			keys = append(keys, n.Name)
			c.givenUp[n.Name] = true
		}
	}
	if len(todo) == 0 {
		return
	}
	c.deleted += len(todo)
	c.recommend(Action{Kind: kind, Nodes: todo, What: fmt.Sprintf(what, names(todo)), givesUp: keys, reported: keys})
}

// failedInstances: instances the provider reports in error are deleted,
// and the group backs off.
func (c *groupCheck) failedInstances() {
	if len(c.failed) == 0 {
		return
	}
	id, failed := c.id, c.failed
	info := failed[0].Status.ErrorInfo
	metrics.RegisterFailedNodeCreations(info.ErrorCode, len(failed))
	c.recommend(emit(v1.EventTypeWarning, EventScaleUpFailed, fmt.Sprintf("Failed adding %d nodes to group %s due to %s.%s - %s",
		len(failed), id, info.ErrorClass, info.ErrorCode, info.ErrorMessage)))
	c.recommend(Action{Kind: BackOff, Reason: backoff.Reason{Class: info.ErrorClass, Code: info.ErrorCode, Message: info.ErrorMessage}})
	delete(c.r.scaleUps, id) // failed, not in flight: a later empty group is no success
	pids := providerIDs(failed)
	for _, pid := range pids {
		c.givenUp[pid] = true
	}
	c.deleted += len(failed)
	c.recommend(Action{Kind: DeleteFailedInstances, Nodes: stubNodes(id, failed),
		What: fmt.Sprintf("delete %d failed instances", len(failed)), givesUp: pids, reported: pids})
}

// startupTimedOut: nodes registered and NotReady since, for longer than
// --max-node-startup-time, are deleted, and the group backs off.
func (c *groupCheck) startupTimedOut() {
	var timedOut []*v1.Node
	for _, n := range c.ga.nodes {
		if c.ga.states[n.Name] == nodeStartupTimedOut {
			timedOut = append(timedOut, n)
		}
	}
	if len(timedOut) == 0 {
		return
	}
	c.recommend(emit(v1.EventTypeWarning, EventScaleUpTimedOut, fmt.Sprintf("Nodes %v of group %s did not become Ready within %v (max node startup time)",
		names(timedOut), c.id, c.opts.MaxNodeStartupTime)))
	c.recommend(Action{Kind: BackOff, Reason: backoff.Reason{Class: cloudprovider.OtherErrorClass, Code: CodeTimeout,
		Message: fmt.Sprintf("nodes did not become Ready within %v", c.opts.MaxNodeStartupTime)}})
	c.giveUpNodes(DeleteNotStarted, timedOut, "delete nodes %v that did not come up")
	delete(c.r.scaleUps, c.id)
}

// scaleUpInFlight ends the group's scale-up in flight: done once every
// node asked for has come up, or timed out after --max-node-provision-time
// (its nodes that did not start deleted, the rest of the increase
// reverted, the group backed off).
func (c *groupCheck) scaleUpInFlight() {
	r, id, now := c.r, c.id, c.as.now
	c.target, c.targetErr = c.ng.TargetSize()
	if c.targetErr != nil {
		c.fail(fmt.Errorf("target size: %w", c.targetErr))
		c.as.st.NotForScaleUp[id] = fmt.Sprintf("target size: %v", c.targetErr)
	}
	c.target = max(0, c.target-c.deleted) // DeleteNodes takes the deleted off the target
	registeredLeft := 0
	var notStarted []*v1.Node
	for _, n := range c.ga.nodes {
		if c.givenUp[n.Name] {
			continue
		}
		registeredLeft++
		if c.ga.states[n.Name] == nodeNotStarted {
			notStarted = append(notStarted, n)
		}
	}
	unregisteredCount := max(0, c.target-registeredLeft)
	req := r.scaleUps[id]
	if req == nil || c.targetErr != nil {
		return
	}
	switch {
	case unregisteredCount == 0 && len(notStarted) == 0 && len(c.givenUp) == 0:
		delete(r.scaleUps, id)
		if r.cfg.Backoff != nil {
			r.cfg.Backoff.Remove(id)
		}
	case c.opts.MaxNodeProvisionTime > 0 && now.After(req.last.Add(c.opts.MaxNodeProvisionTime)):
		delete(r.scaleUps, id)
		c.recommend(emit(v1.EventTypeWarning, EventScaleUpTimedOut, fmt.Sprintf("Nodes added to group %s failed to register within %v",
			id, now.Sub(req.at).Round(time.Second))))
		c.recommend(Action{Kind: BackOff, Reason: backoff.Reason{Class: cloudprovider.OtherErrorClass, Code: CodeTimeout,
			Message: fmt.Sprintf("scale-up timed out after %v", c.opts.MaxNodeProvisionTime)}})
		c.giveUpNodes(DeleteNotStarted, notStarted, "delete nodes %v that did not come up")
		if unregisteredCount > 0 {
			pids := providerIDs(c.unregistered)
			for _, pid := range pids {
				c.givenUp[pid] = true
			}
			c.recommend(Action{Kind: RevertScaleUp, Delta: -unregisteredCount,
				What: fmt.Sprintf("decrease target size by %d", unregisteredCount),
				OnFailure: &Event{Type: v1.EventTypeWarning, Reason: EventFailedToRevertScaleUp,
					Message: fmt.Sprintf("Failed to revert scale-up of group %s by %d", id, unregisteredCount)},
				givesUp: pids, reported: []string{fmt.Sprintf("%d unregistered of %s", unregisteredCount, id)}})
		}
	}
}

// longUnregistered: instances unregistered for longer than
// --max-node-provision-time are deleted, unless that would take the group
// below its min size.
func (c *groupCheck) longUnregistered() {
	id, now := c.id, c.as.now
	var long []cloudprovider.Instance
	for _, in := range c.unregistered {
		if c.givenUp[in.ProviderID] {
			continue
		}
		first, ok := c.since[in.ProviderID]
		if !ok {
			first = now
			c.since[in.ProviderID] = now
		}
		if c.opts.MaxNodeProvisionTime > 0 && now.Sub(first) > c.opts.MaxNodeProvisionTime {
			long = append(long, in)
		}
	}
	c.ga.rd.LongUnregistered = len(long)
	c.ga.target = c.target
	if len(long) == 0 || c.targetErr != nil {
		return
	}
	if c.target-len(long) < c.ng.MinSize() {
		c.fail(fmt.Errorf("%d long-unregistered instances kept: deleting them would go below min size %d", len(long), c.ng.MinSize()))
		return
	}
	pids := providerIDs(long)
	c.recommend(Action{Kind: DeleteLongUnregistered, Nodes: stubNodes(id, long), What: "delete unregistered instances",
		OnSuccess: &Event{Type: v1.EventTypeNormal, Reason: EventDeleteUnregistered,
			Message: fmt.Sprintf("Removed unregistered nodes %v of group %s", pids, id)},
		OnFailure: &Event{Type: v1.EventTypeWarning, Reason: EventDeleteUnregisteredFailed,
			Message: fmt.Sprintf("Failed to remove unregistered nodes %v of group %s", pids, id)},
		givesUp: pids, reported: pids})
}

// finishGroup counts what the group's applied actions gave up on, adds
// the group's remaining nodes to the snapshot and returns its readiness.
func (r *Registry) finishGroup(as *Assessment, ga *groupAssessment) Readiness {
	st, id, g, rd := as.st, ga.ng.Id(), ga.g, ga.rd
	gone := map[string]bool{}
	since := r.unregisteredSince[id]
	for i := ga.first; i < ga.end; i++ {
		a := &as.Actions[i]
		if !a.IsCloudCall() || !a.Applied {
			continue
		}
		if a.Err != nil {
			st.Errors = append(st.Errors, fmt.Errorf("node group %s: %s: %w", id, a.What, a.Err))
			continue
		}
		for _, k := range a.givesUp {
			gone[k] = true
			delete(since, k)
		}
		st.GivenUp = append(st.GivenUp, a.reported...)
		if a.Kind == DeleteLongUnregistered {
			metrics.RegisterOldUnregisteredNodesRemoved(len(a.Nodes))
		}
	}

	// What is left goes into the snapshot.
	target := ga.target
	if t, err := ga.ng.TargetSize(); err == nil {
		target = t
	}
	registeredLeft := 0
	for _, n := range ga.nodes {
		if gone[n.Name] {
			continue
		}
		registeredLeft++
		st.GroupOf[n.Name] = id
		switch ga.states[n.Name] {
		case nodeReady:
			rd.Ready++
			st.Objects.Nodes = append(st.Objects.Nodes, AsMember(n, id))
			st.Ready[n.Name] = true
		case nodeNotStarted, nodeStartupTimedOut: // timed out but not deleted: still expected
			rd.NotStarted++
			if g == nil {
				continue
			}
			// Coming up: the node as its group's template says it will
			// be, devices included, under its own name.
			tmpl, tmplSlices := g.NewNode(n.Name)
			st.Objects.Nodes = append(st.Objects.Nodes, tmpl)
			if ga.slicesOf[n.Name] == 0 {
				st.Objects.ResourceSlices = append(st.Objects.ResourceSlices, tmplSlices...)
			}
			st.Upcoming[id]++
		case nodeUnready:
			rd.Unready++
		case nodeResourceUnready:
			rd.Unready++
			rd.ResourceUnready++
		}
	}
	rd.Unregistered = max(0, target-registeredLeft)
	if g != nil {
		nodes, slices := UpcomingNodes(g, ga.namePrefix, registeredLeft, target)
		st.Objects.Nodes = append(st.Objects.Nodes, nodes...)
		st.Objects.ResourceSlices = append(st.Objects.ResourceSlices, slices...)
		st.Upcoming[id] += len(nodes)
	}

	total := rd.Ready + rd.Unready + rd.NotStarted
	st.GroupHealthy[id] = r.healthy(rd.Unready, total)
	if bs := r.BackoffStatus(id, as.now); bs.BackedOff {
		st.NotForScaleUp[id] = fmt.Sprintf("in backoff after failed scale-up until %s (%s: %s)",
			bs.Until.UTC().Format(time.RFC3339), bs.Reason.Code, bs.Reason.Message)
	} else if !st.GroupHealthy[id] {
		st.NotForScaleUp[id] = fmt.Sprintf("unhealthy: %d of %d nodes unready", rd.Unready, total)
	}
	return rd
}

// UpcomingNodes stand in for the nodes a group was asked for that have
// not registered (target size above the registered members): its
// template, named <prefix>-upcoming-<i>, so that the pods they will take
// do not trigger a second scale-up.
func UpcomingNodes(g *nodegroup.NodeGroup, namePrefix string, registered, target int) ([]*v1.Node, []*resourceapi.ResourceSlice) {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	for i := registered; i < target; i++ {
		n, s := g.NewNode(fmt.Sprintf("%s-upcoming-%d", namePrefix, i))
		nodes = append(nodes, n)
		slices = append(slices, s...)
	}
	return nodes, slices
}

// AsMember is n as the planner counts it toward its group: the planner
// knows members by the group label, but a provider may know them by
// providerID only (a Cluster API Machine's node has no draxr label), and
// a member left uncounted lets the plan grow the group past its max size.
// The informer's object is shared, so a labelled copy is returned.
func AsMember(n *v1.Node, group string) *v1.Node {
	if nodegroup.Group(n) == group {
		return n
	}
	c := *n
	c.Labels = make(map[string]string, len(n.Labels)+1)
	for k, v := range n.Labels {
		c.Labels[k] = v
	}
	c.Labels[nodegroup.GroupLabel] = group
	return &c
}

// stubNodes stands unregistered instances in for Nodes, as CA does, so
// DeleteNodes can name them by provider ID.
func stubNodes(group string, instances []cloudprovider.Instance) []*v1.Node {
	out := make([]*v1.Node, 0, len(instances))
	for _, in := range instances {
		n := &v1.Node{}
		n.Name = in.NodeName
		if n.Name == "" {
			n.Name = in.ProviderID
		}
		n.Spec.ProviderID = in.ProviderID
		n.Labels = map[string]string{nodegroup.GroupLabel: group}
		out = append(out, n)
	}
	return out
}

func names(nodes []*v1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func providerIDs(instances []cloudprovider.Instance) []string {
	out := make([]string, len(instances))
	for i, in := range instances {
		out[i] = in.ProviderID
	}
	return out
}
