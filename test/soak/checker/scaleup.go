// The scale-up invariants: a group grows by no more nodes than the pods
// pending for it, never while a node had room, and a pod that a group
// could take does not stay pending for long.

package checker

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
)

// nodeCreated: a group may not grow, within one loop, by more nodes than
// there were pods pending around then that its nodes could hold. It is
// judged Settle later, so pods the soak sees late still count.
func (c *Checker) nodeCreated(name string) {
	g := c.groupByNodeName(name)
	if g == "" {
		return
	}
	cr := creation{at: c.now, group: g, name: name}
	c.creations = append(c.creations, cr)
	if !c.viewStale() {
		c.toJudge = append(c.toJudge, cr)
	}
}

func (c *Checker) judgeCreation(cr creation) {
	c.counts[ScaleUpWithinPending]++
	window := c.cfg.ScanInterval
	recent := 0
	for _, o := range c.creations {
		if o.group == cr.group && !o.at.After(cr.at) && cr.at.Sub(o.at) <= window {
			recent++
		}
	}
	since := cr.at.Add(-window - c.cfg.Settle)
	pending := 0
	for _, s := range c.pods {
		p := s.pod
		created := p.CreationTimestamp.IsZero() || !p.CreationTimestamp.After(cr.at.Add(time.Second))
		boundBefore := !s.boundAt.IsZero() && s.boundAt.Before(since)
		goneBefore := s.gone && s.goneAt.Before(since)
		if created && !boundBefore && !goneBefore && c.fitsGroup(p, cr.group, true) {
			pending++
		}
	}
	if recent > pending {
		c.fail(ScaleUpWithinPending, "group %s grew by %d nodes within %s (last %s) for %d pending pods that fit it", cr.group, recent, window, cr.name, pending)
	}
}

func (c *Checker) fitsGroup(p *v1.Pod, g string, published bool) bool {
	capacity := c.cfg.Capacity(g, published)
	for r, n := range c.cfg.Demand(p) {
		if capacity[r] < n {
			return false
		}
	}
	return true
}

// scaleUp: the pod that triggered a scale-up had no room on a node that
// had been Ready, untouched and able to take it for a while.
func (c *Checker) scaleUp(podKey string) {
	s := c.pods[podKey]
	if s == nil || s.gone || s.pod.Spec.NodeName != "" || c.viewStale() {
		return
	}
	c.counts[NoScaleUpWithRoom]++
	settled := c.now.Add(-c.cfg.Settle)
	demand := c.cfg.Demand(s.pod)
	var names []string
	for name := range c.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := c.nodes[name]
		if n.gone || n.readySince.IsZero() || n.readySince.After(settled) || n.lastChange.After(settled) ||
			n.node.Spec.Unschedulable || blockingTaint(n.node) {
			continue
		}
		published := !n.slicesSince.IsZero() && !n.slicesSince.After(settled)
		free := c.cfg.Capacity(c.groupOf(n.node), published)
		for _, p := range c.pods {
			if !p.gone && p.pod.Spec.NodeName == name && !terminal(p.pod) {
				for r, q := range c.cfg.Demand(p.pod) {
					free[r] -= q
				}
			}
		}
		fits := true
		for r, q := range demand {
			if free[r] < q {
				fits = false
			}
		}
		if fits {
			c.fail(NoScaleUpWithRoom, "pod %s triggered a scale-up while node %s had room for it (free %v, pod needs %v)", podKey, name, free, demand)
			return
		}
	}
}

func blockingTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

func (c *Checker) someGroupCouldTake(p *v1.Pod) bool {
	for _, g := range c.cfg.Groups {
		if !g.Faulty && c.live(g.Name) < g.Max && c.fitsGroup(p, g.Name, true) {
			return true
		}
	}
	return false
}
