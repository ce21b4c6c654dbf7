package scaleup

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// Domains are the values of one topology key (a node label) as the
// scheduler's TopologyPlacementGenerator sees them, one placement per
// value, and the node groups whose new nodes land in each.
type Domains struct {
	key    string
	values []string // sorted
	// nodes are each value's existing nodes, in the snapshot's order;
	// nodes without the label are in no domain and never count.
	nodes map[string][]string
	// groups are each value's groups: those whose template carries the
	// label with that value and whose live nodes all agree.
	groups map[string][]*nodegroup.NodeGroup
	// unknown says, per group of no known domain, why.
	unknown map[string]string
}

// Domains reads the domains of key from the snapshot's nodes and the
// planner's groups' templates (see findDomains).
func (p *Planner) Domains(key string) *Domains {
	return findDomains(p.Engine.Snapshot(), p.Groups, key)
}

// Values are the domains' label values, sorted.
func (d *Domains) Values() []string { return d.values }

// NewNodesPossible says whether some group makes nodes in the domain.
func (d *Domains) NewNodesPossible(value string) bool { return len(d.groups[value]) > 0 }

// ExistingNodes counts the domain's existing nodes.
func (d *Domains) ExistingNodes(value string) int { return len(d.nodes[value]) }

// ForDomain is the planner restricted to one domain: the domain's
// existing nodes only and the groups whose new nodes land there only.
// Pods planned with it should carry the domain in their node selector
// (InDomain), so that the scheduler's own filter holds them there.
func (p *Planner) ForDomain(d *Domains, value string) *Planner {
	q := *p
	q.Groups = d.groups[value]
	q.domainNodes, q.inDomain = d.nodes[value], true
	return &q
}

// findDomains reads the domains of key from the snapshot's nodes and the
// groups' templates. A group whose template lacks the label, or whose
// live nodes are in another domain than its template says, has no known
// domain: the value of its new nodes cannot be predicted.
func findDomains(snap *snapshot.Snapshot, groups []*nodegroup.NodeGroup, key string) *Domains {
	d := &Domains{key: key, nodes: map[string][]string{}, groups: map[string][]*nodegroup.NodeGroup{}, unknown: map[string]string{}}
	memberValues := map[string]map[string]bool{}
	for _, name := range snap.NodeNames() {
		node := snap.NodeInfo(name).Node()
		value, ok := node.Labels[key]
		if ok {
			d.nodes[value] = append(d.nodes[value], name)
		}
		if g := nodegroup.Group(node); g != "" {
			if memberValues[g] == nil {
				memberValues[g] = map[string]bool{}
			}
			memberValues[g][value] = true
		}
	}
	for _, g := range groups {
		value, ok := g.Spec.Template.Labels[key]
		if key == v1.LabelHostname {
			// Each new node is a domain of its own, named only when made.
			d.unknown[g.Name] = fmt.Sprintf("node group %s: %s is each new node's own name, so no domain of it can be grown", g.Name, key)
			continue
		}
		if !ok {
			d.unknown[g.Name] = fmt.Sprintf("node group %s: its template has no label %s, so the domain of its new nodes is unknown", g.Name, key)
			continue
		}
		if others := otherValues(memberValues[g.Name], value); len(others) > 0 {
			d.unknown[g.Name] = fmt.Sprintf("node group %s: its template says %s=%s but its nodes are in %s, so the domain of its new nodes is unknown",
				g.Name, key, value, strings.Join(others, ", "))
			continue
		}
		d.groups[value] = append(d.groups[value], g)
	}
	seen := map[string]bool{}
	for v := range d.nodes {
		seen[v] = true
	}
	for v := range d.groups {
		seen[v] = true
	}
	for v := range seen {
		d.values = append(d.values, v)
	}
	sort.Strings(d.values)
	return d
}

// otherValues are the values in members other than value, written
// key-less ("b", or "nodes without the label"), sorted.
func otherValues(members map[string]bool, value string) []string {
	var out []string
	for v := range members {
		switch v {
		case value:
		case "":
			out = append(out, "nodes without the label")
		default:
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// domainTrial is a gang's outcome in one domain.
type domainTrial struct {
	value string
	// pods are the gang's pods held to the domain (nil until planned).
	pods []*v1.Pod
	out  gangOutcome
}

// planTopologyGang plans a gang whose PodGroup requires one domain of a
// topology key, as the scheduler's placement algorithm does: one
// placement per value of the key, all of the gang in it or none. Each
// domain is tried with that domain's existing nodes first, then new
// nodes of that domain's groups in one atomic step; the domain needing
// the fewest new nodes is chosen (ties by the expander). A gang with pods
// already scheduled has only their domain. If no domain can hold it,
// nothing is planned and each pod says, per domain, what was short.
func (p *Planner) planTopologyGang(ctx context.Context, st *state, gp gangPods, plan *Plan) ([]*v1.Pod, error) {
	key := gp.gang.TopologyKey
	d := findDomains(p.Engine.Snapshot(), st.groups, key)
	values, why := p.gangDomains(gp, d)
	if why != "" {
		refuseGang(gp, plan, TopologyDomainNotFound, why, nil)
		return nil, nil
	}
	snap := p.Engine.Snapshot()
	var trials []domainTrial
	alike := newAlikeDomains(p, st, gp, key)
	for _, v := range values {
		like := alike.key(st, d, v)
		if out, ok := alike.known[like]; ok && !p.Engine.VerifiesShortcuts() {
			trials = append(trials, domainTrial{value: v, out: out.renamed(d.groups[v][0].Name)})
			continue
		}
		pods := InDomain(gp.pods, key, v)
		snap.Fork()
		planned := maps.Clone(st.planned)
		out, err := p.tryGangIn(ctx, st, gangPods{gang: gp.gang, pods: pods}, d, v)
		snap.Revert()
		st.planned = planned
		if err != nil {
			return nil, err
		}
		if like != "" {
			alike.learn(like, out, d.groups[v][0].Name)
		}
		trials = append(trials, domainTrial{value: v, pods: pods, out: out})
	}
	best := p.bestDomain(st, trials)
	if best == nil {
		refuseGang(gp, plan, TopologyDomainNotFound, noDomainReason(gp, d, trials), nil)
		return nil, nil
	}
	if best.pods == nil {
		best.pods = InDomain(gp.pods, key, best.value)
	}
	out, err := p.tryGangIn(ctx, st, gangPods{gang: gp.gang, pods: best.pods}, d, best.value)
	if err != nil {
		return nil, err
	}
	out.applyTo(plan, gp, &Topology{Key: key, Value: best.value})
	return out.rest, nil
}

// inRunningDomain is pod held to the one domain its topology gang's
// running pods are in (as the scheduler places it), or pod as it is when
// the gang has no key or its pods are in no single known domain.
func (p *Planner) inRunningDomain(g *gang.Gang, pod *v1.Pod) *v1.Pod {
	if g.TopologyKey == "" {
		return pod
	}
	snap := p.Engine.Snapshot()
	value := ""
	for _, name := range g.ScheduledNodes() {
		info := snap.NodeInfo(name)
		if info == nil {
			continue
		}
		v, ok := info.Node().Labels[g.TopologyKey]
		if !ok || value != "" && v != value {
			return pod
		}
		value = v
	}
	if value == "" {
		return pod
	}
	return InDomain([]*v1.Pod{pod}, g.TopologyKey, value)[0]
}

// gangDomains are the domains a gang may be placed in: every value, or,
// once some of its pods run, theirs alone (the scheduler generates only
// that placement). why is set when the running pods leave no domain.
func (p *Planner) gangDomains(gp gangPods, d *Domains) ([]string, string) {
	running := gp.gang.ScheduledNodes()
	if len(running) == 0 {
		if len(d.values) == 0 {
			return nil, fmt.Sprintf("%s must run in one domain of %s (spec.schedulingConstraints.topology[0].key), "+
				"but no node and no node group template has the label%s", gp.gang, d.key, unknownGroups(d))
		}
		return d.values, ""
	}
	snap := p.Engine.Snapshot()
	values := map[string]bool{}
	for _, name := range running {
		info := snap.NodeInfo(name)
		if info == nil {
			continue // gone: counts for no domain
		}
		v, ok := info.Node().Labels[d.key]
		if !ok {
			return nil, fmt.Sprintf("%s must run in one domain of %s, but its pod on node %s runs on a node without the label", gp.gang, d.key, name)
		}
		values[v] = true
	}
	if len(values) > 1 {
		return nil, fmt.Sprintf("%s must run in one domain of %s, but its running pods are in more than one (%s)",
			gp.gang, d.key, strings.Join(sortedKeys(values), ", "))
	}
	return sortedKeys(values), ""
}

// tryGangIn is tryGang in one domain: existing nodes of the domain only,
// new nodes of the domain's groups only; pods carry the domain's label in
// their node selector, so every placement is checked by the scheduler's
// own NodeAffinity filter.
func (p *Planner) tryGangIn(ctx context.Context, st *state, gp gangPods, d *Domains, value string) (gangOutcome, error) {
	q := p.ForDomain(d, value)
	groups := st.groups
	st.groups = q.Groups
	defer func() { st.groups = groups }()
	return q.tryGang(ctx, st, gp)
}

// bestDomain is the trial that plans the gang with the fewest new nodes;
// among equals the expander chooses by their groups, and otherwise the
// first value. nil when no domain holds the gang.
func (p *Planner) bestDomain(st *state, trials []domainTrial) *domainTrial {
	var fits []*domainTrial
	for i := range trials {
		t := &trials[i]
		if t.out.refused {
			continue
		}
		switch {
		case len(fits) == 0 || t.out.newNodes() < fits[0].out.newNodes():
			fits = []*domainTrial{t}
		case t.out.newNodes() == fits[0].out.newNodes():
			fits = append(fits, t)
		}
	}
	if len(fits) <= 1 || fits[0].out.newNodes() == 0 {
		if len(fits) == 0 {
			return nil
		}
		return fits[0]
	}
	options := make([]expander.Option, 0, len(fits))
	byGroup := map[string]*domainTrial{}
	for _, t := range fits {
		su := t.out.scaleUps[0]
		if _, ok := byGroup[su.NodeGroup]; ok {
			continue
		}
		byGroup[su.NodeGroup] = t
		options = append(options, st.pricedSteps(expander.Option{Group: su.NodeGroup, NewNodes: t.out.newNodes(), PodCount: len(su.Pods)}, t.out.scaleUps))
	}
	if best := p.Expander.Best(options); best.Group != "" {
		return byGroup[best.Group]
	}
	return fits[0]
}

// noDomainReason says why no domain holds the gang: per domain, what its
// existing nodes take and what its groups lack; and the groups of no
// known domain.
func noDomainReason(gp gangPods, d *Domains, trials []domainTrial) string {
	parts := make([]string, 0, len(trials))
	for _, t := range trials {
		why := strings.TrimPrefix(t.out.short, "; no scale-up takes them all: ")
		if len(d.groups[t.value]) == 0 {
			why = "no node group makes nodes in it"
		}
		parts = append(parts, fmt.Sprintf("%s=%s: %d fit its %d existing nodes, %s", d.key, t.value, t.out.onExisting, len(d.nodes[t.value]), why))
	}
	return fmt.Sprintf("%s must run its %d pods in one domain of %s (spec.schedulingConstraints.topology[0].key), and no domain holds them: %s%s",
		gp.gang, gp.gang.Need(), d.key, strings.Join(parts, "; "), unknownGroups(d))
}

// UnknownGroups names the groups of no known domain and why, for a
// reason ("" when there are none).
func (d *Domains) UnknownGroups() string { return unknownGroups(d) }

// unknownGroups names the groups of no known domain, for a reason.
func unknownGroups(d *Domains) string {
	if len(d.unknown) == 0 {
		return ""
	}
	names := sortedKeys(d.unknown)
	whys := make([]string, len(names))
	for i, n := range names {
		whys[i] = d.unknown[n]
	}
	return "; not grown for it: " + strings.Join(whys, "; ")
}

// InDomain copies pods with the domain's label added to their node
// selector: the scheduler then places them only there.
func InDomain(pods []*v1.Pod, key, value string) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, pod := range pods {
		c := pod.DeepCopy()
		if c.Spec.NodeSelector == nil {
			c.Spec.NodeSelector = map[string]string{}
		}
		// A pod that selects a value of its own keeps it: it then fits no
		// other domain.
		if _, own := c.Spec.NodeSelector[key]; !own {
			c.Spec.NodeSelector[key] = value
		}
		out[i] = c
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// alikeDomains remembers, for one gang, how many new nodes a domain of
// each kind gives it, so that of 50 racks alike only the first is planned
// in full (docs/shortcuts.md, "Alike domains"). Two domains are alike when
// each has one group, the groups' templates are equal but for the
// topology label, their room is equal, and the domain's existing nodes
// are plainly full for every pod of the gang (NoRoom): then only the
// group decides, and it decides alike. Only planned outcomes are
// remembered: a refusal's reason names its own group, so it is planned
// in full. Under the verify switch every domain is planned in full and
// held to what was remembered.
type alikeDomains struct {
	eligible bool
	// full are, per shape of the gang's pods (what NoRoom reads of them),
	// its plain "no room" test and the nodes known full for the shape.
	full  []fullTest
	known map[string]gangOutcome
}

type fullTest struct {
	test  func(node string) bool
	known map[string]bool
}

func newAlikeDomains(p *Planner, st *state, gp gangPods, key string) *alikeDomains {
	a := &alikeDomains{}
	a.eligible = !p.noAlikeDomains && estimator.LabelBlind(p.Engine, gp.pods) && !estimator.SelectsNodesByName(gp.pods) &&
		!mentionsKey(gp.pods, key) && !daemonSetsSelect(p.DaemonSets, key) && st.slicesNodeLocal()
	if !a.eligible {
		return a
	}
	// Gangs alike in what the scheduler reads of their pods (not their
	// names, owners or group) get alike outcomes in alike domains.
	shape := gangShape(gp)
	if st.alikeOutcomes[shape] == nil {
		st.alikeOutcomes[shape] = map[string]gangOutcome{}
	}
	a.known = st.alikeOutcomes[shape]
	seen := map[string]bool{}
	for _, pod := range gp.pods {
		shape := noRoomShape(pod)
		if seen[shape] || !a.eligible {
			continue
		}
		seen[shape] = true
		test := p.Engine.NoRoom(pod)
		a.eligible = test != nil
		if st.fullNodes[shape] == nil {
			st.fullNodes[shape] = map[string]bool{}
		}
		a.full = append(a.full, fullTest{test: test, known: st.fullNodes[shape]})
	}
	return a
}

// key is the domain's kind, "" when the shortcut does not apply to it.
func (a *alikeDomains) key(st *state, d *Domains, value string) string {
	groups := d.groups[value]
	if !a.eligible || len(groups) != 1 {
		return ""
	}
	for _, full := range a.full {
		for _, n := range d.nodes[value] {
			if full.known[n] {
				continue
			}
			if !full.test(n) {
				return ""
			}
			// A plan only adds pods to a node: full stays full.
			full.known[n] = true
		}
	}
	g := groups[0]
	// Reasons name the max size and the nodes there are: alike only if equal.
	return fmt.Sprintf("%s/%d/%d/%d/%d", templateSignatureWithout(g, d.key), st.stepRoom(g), st.room(g),
		g.Spec.MaxSize, st.current[g.Name]+st.planned[g.Name])
}

// learn remembers an outcome under like, planned in domain value with
// group; under the verify switch it holds a remembered one to the full
// path's.
func (a *alikeDomains) learn(like string, out gangOutcome, group string) {
	if like == "" {
		return
	}
	if known, ok := a.known[like]; ok {
		if got := known.renamed(group); got.refused != out.refused || got.newNodes() != out.newNodes() || got.short != out.short {
			placement.ShortcutDiffers("alike domains", "group %s: refused %t, %d new nodes, %q in full; refused %t, %d, %q as remembered",
				group, out.refused, out.newNodes(), out.short, got.refused, got.newNodes(), got.short)
		}
		return
	}
	out.group = group
	if !out.refused {
		// Only the count and the pods' number are read of a remembered
		// plan (bestDomain); the chosen domain is planned in full.
		out = gangOutcome{group: group, onExisting: out.onExisting,
			scaleUps: []ScaleUp{{NodeGroup: group, NewNodes: out.newNodes(), Pods: make([]PodRef, len(out.scaleUps[0].Pods))}}}
	}
	a.known[like] = out
}

// renamed is a remembered outcome as group's: a plan's group, and a
// refusal's reason, which names the group it was planned with.
func (o gangOutcome) renamed(group string) gangOutcome {
	from, to := "node group "+o.group+":", "node group "+group+":"
	o.short = strings.ReplaceAll(o.short, from, to)
	if len(o.reasons) > 0 {
		reasons := make([]GroupReason, len(o.reasons))
		for i, r := range o.reasons {
			r.Message = strings.ReplaceAll(r.Message, from, to)
			if r.NodeGroup == o.group {
				r.NodeGroup = group
			}
			reasons[i] = r
		}
		o.reasons = reasons
	}
	if len(o.scaleUps) == 1 {
		o.scaleUps = []ScaleUp{{NodeGroup: group, NewNodes: o.scaleUps[0].NewNodes, Pods: o.scaleUps[0].Pods}}
	}
	o.group = group
	return o
}

// mentionsKey says whether a pod selects nodes by key itself.
func mentionsKey(pods []*v1.Pod, key string) bool {
	for _, pod := range pods {
		if _, ok := pod.Spec.NodeSelector[key]; ok {
			return true
		}
		if len(pod.Spec.TopologySpreadConstraints) > 0 {
			return true
		}
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && strings.Contains(a.NodeAffinity.String(), key) {
			return true
		}
	}
	return false
}

// daemonSetsSelect says whether a DaemonSet's pods select nodes by key:
// new nodes of alike groups would then run different DaemonSet pods.
func daemonSetsSelect(dss []*appsv1.DaemonSet, key string) bool {
	for _, ds := range dss {
		spec := ds.Spec.Template.Spec
		if _, ok := spec.NodeSelector[key]; ok {
			return true
		}
		if a := spec.Affinity; a != nil && a.NodeAffinity != nil && strings.Contains(a.NodeAffinity.String(), key) {
			return true
		}
	}
	return false
}

// allSlicesNodeLocal: no pool spans nodes (a rack's shared pool would make
// its domain unlike the others).
func allSlicesNodeLocal(snap *snapshot.Snapshot) bool {
	for _, s := range snap.AllResourceSlices() {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			return false
		}
	}
	return true
}

// templateSignatureWithout is the group's template signature with the
// label key taken out.
func templateSignatureWithout(g *nodegroup.NodeGroup, key string) string {
	c := *g
	c.Spec.Template.Labels = maps.Clone(g.Spec.Template.Labels)
	delete(c.Spec.Template.Labels, key)
	return templateSignature(&c)
}

// noRoomShape is what placement's NoRoom reads of a pod: its requests
// and the claims it names; pods of one shape are plainly full on the same
// nodes.
func noRoomShape(pod *v1.Pod) string {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true})
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(req)) {
		q := req[name]
		fmt.Fprintf(&b, "%s=%s,", name, q.String())
	}
	for _, c := range pod.Spec.ResourceClaims {
		fmt.Fprintf(&b, "|%s:%v:%v", c.Name, ptrString(c.ResourceClaimName), ptrString(c.ResourceClaimTemplateName))
	}
	return b.String()
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// gangShape is what the scheduler reads of a gang's pods in a domain
// where no pod reads labels: their specs but for the group they name, and
// the quorum still needed.
func gangShape(gp gangPods) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d;", gp.gang.Need(), len(gp.pods))
	for _, pod := range gp.pods {
		spec := pod.Spec
		spec.SchedulingGroup = nil
		b, _ := json.Marshal(&spec)
		_, _ = h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum64())
}

// slicesNodeLocal memoizes allSlicesNodeLocal for the plan: a plan adds
// only new nodes' own slices, so the answer does not change.
func (st *state) slicesNodeLocal() bool {
	if st.nodeLocal == nil {
		local := allSlicesNodeLocal(st.p.Engine.Snapshot())
		st.nodeLocal = &local
	}
	return *st.nodeLocal
}
