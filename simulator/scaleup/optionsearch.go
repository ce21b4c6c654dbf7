package scaleup

import (
	"context"
	"fmt"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
)

// optionSearch is one step's options: every group with room estimated
// (or set aside by the expander's bound), as the expander will see them.
type optionSearch struct {
	p    *Planner
	st   *state
	pods []*v1.Pod
	need int
	// options are what the expander chooses among; packed is each
	// group's packed option, scored marks groups whose option holds the
	// scored count.
	options []expander.Option
	packed  map[string]expander.Option
	scored  map[string]bool
	// Groups with the same template and the same room give the same answer
	// but for their name: estimate one of them.
	seen map[string]groupAnswer
	// rank is, per group, how far down their claims' firstAvailable lists
	// the pods had to go on its new nodes.
	rank  map[string]int
	bound optionBound
	best  bestSoFar // of the options the expander will see
	alike alikeKeys
	// setAside are the groups the bound set aside, in group order.
	setAside []*nodegroup.NodeGroup
	order    map[string]int // the groups' order
	// keyOf is each group's alike key; scoredByKey the scored option of
	// the first group of a key scored, which alike groups share.
	keyOf       map[string]string
	scoredByKey map[string]expander.Option
	lostByKey   map[string]int // the count at which an alike search stopped
	// severalKinds: the pods are of more than one kind (nil: not asked yet).
	severalKinds *bool
	// fixedBar keeps best as it is while groups are judged again.
	fixedBar bool
}

func newOptionSearch(p *Planner, st *state, pods []*v1.Pod, need int) *optionSearch {
	s := &optionSearch{p: p, st: st, pods: pods, need: need,
		packed: map[string]expander.Option{}, scored: map[string]bool{},
		seen: map[string]groupAnswer{}, rank: map[string]int{},
		bound: newOptionBound(p.Expander.Name(), pods, p.DaemonSets), best: noBestYet(), alike: newAlikeKeys(p, pods),
		order: make(map[string]int, len(st.groups)), keyOf: map[string]string{}, scoredByKey: map[string]expander.Option{}, lostByKey: map[string]int{}}
	for i, g := range st.groups {
		s.order[g.Name] = i
	}
	return s
}

// consider estimates g (or takes the answer of a group alike) and adds its
// option, unless the bound sets it aside.
func (s *optionSearch) consider(ctx context.Context, g *nodegroup.NodeGroup) error {
	p, st := s.p, s.st
	room := st.stepRoom(g)
	if room <= 0 {
		return nil
	}
	key := s.alike.key(st, g, room)
	s.keyOf[g.Name] = key
	a, ok := s.seen[key]
	switch {
	case ok && !estimator.SelectsNodesByName(s.pods):
		if !a.abandoned && s.alike.fresh != nil && p.Engine.VerifiesShortcuts() {
			if err := p.verifyAlike(ctx, st, g, s.pods, a.option); err != nil {
				return err
			}
		}
		st.copyVerdicts(a.group, g.Name)
		if a.abandoned {
			s.setAside = append(s.setAside, g)
			return nil
		}
		a.option.Group = g.Name
	default:
		var err error
		if a, err = p.estimateOption(ctx, st, g.Name, s.pods, s.bound, s.best); err != nil {
			return err
		}
		s.seen[key] = a
		if a.abandoned {
			s.setAside = append(s.setAside, g)
			return nil
		}
	}
	s.rank[g.Name] = a.rank
	if a.option.PodCount >= s.need {
		o := st.priced(a.option)
		s.options = append(s.options, o)
		s.packed[g.Name] = o
		if !s.fixedBar {
			s.best.add(o)
		}
	}
	return nil
}

// rescore gives the expander, for the options it would choose, the count
// the group's new nodes need as the scheduler places the pods (the scored
// check of finalEstimate), not the packed one. The option chosen is
// scored; while it comes out worse than packed, the expander chooses
// again. A packed option bounds its scored one from below, so once the
// expander chooses a scored option, no option it has seen beats it; the
// groups the bound set aside against a lower bar are then judged against
// that option, and any that could beat it join the options.
func (s *optionSearch) rescore(ctx context.Context) error {
	// bar is the lowest value the groups set aside were judged against
	// (at first the best packed option, which only fell as they were
	// estimated; then the choice they were judged against again): they
	// need judging again only once the choice is worse than it.
	bar := s.bestValue()
	for {
		chosen := s.p.Expander.Best(preferredChoices(s.options, s.rank))
		if chosen.Group == "" {
			return nil
		}
		if s.scored[chosen.Group] {
			if len(s.setAside) > 0 && s.value(chosen) > bar {
				if err := s.reconsider(ctx, chosen); err != nil {
					return err
				}
				bar = s.value(chosen)
				continue
			}
			return nil
		}
		// Of the options that tie with the choice, the one of fewest
		// nodes is scored first: its count then bounds the others'
		// searches (loseAt). Which is scored first does not change the
		// outcome, since the chosen option is scored before it is kept.
		next := chosen
		for _, o := range preferredChoices(s.options, s.rank) {
			if !s.scored[o.Group] && s.value(o) <= s.value(chosen)+expander.Tie && o.NewNodes < next.NewNodes {
				next = o
			}
		}
		o, err := s.scoredOptionOf(ctx, next.Group)
		if err != nil {
			return err
		}
		s.scored[next.Group] = true
		i := slices.IndexFunc(s.options, func(x expander.Option) bool { return x.Group == next.Group })
		if o.PodCount >= s.need {
			s.options[i] = o
		} else {
			s.options = slices.Delete(s.options, i, i+1)
		}
	}
}

// bestValue is the value of the best option the bound has seen.
func (s *optionSearch) bestValue() float64 {
	if s.bound.expander == "price" {
		return s.best.costPerPod
	}
	return s.best.waste
}

// value is what the expander's bound compares: waste for least-waste,
// cost per pod for price.
func (s *optionSearch) value(o expander.Option) float64 {
	if s.bound.expander == "price" {
		if !o.PriceKnown {
			return math.Inf(1)
		}
		return expander.CostPerPod(o)
	}
	return o.Waste
}

// reconsider judges the groups set aside again, against the chosen
// (scored) option instead of the best packed one.
func (s *optionSearch) reconsider(ctx context.Context, chosen expander.Option) error {
	// Judged against the choice alone: a packed option found better now
	// may still come out worse scored, and the groups judged after it
	// would then need judging again.
	s.best, s.fixedBar = noBestYet(), true
	defer func() { s.fixedBar = false }()
	s.best.add(chosen)
	again := s.setAside
	s.setAside = nil
	for key, a := range s.seen {
		if a.abandoned {
			delete(s.seen, key)
		}
	}
	for _, g := range again {
		if err := s.consider(ctx, g); err != nil {
			return err
		}
	}
	// In group order, as the expander saw them first (ties go to the
	// earlier group).
	slices.SortStableFunc(s.options, func(a, b expander.Option) int {
		return s.order[a.Group] - s.order[b.Group]
	})
	return nil
}

// scoredOptionOf is the group's scored option, or that of a group alike
// (the same answer but for the name, as for packed options).
func (s *optionSearch) scoredOptionOf(ctx context.Context, group string) (expander.Option, error) {
	packed := s.packed[group]
	if !s.mayScore(packed) {
		return packed, nil
	}
	key := s.keyOf[group]
	if o, ok := s.scoredByKey[key]; ok && !estimator.SelectsNodesByName(s.pods) {
		o.Group = group
		return s.st.priced(o), nil
	}
	loseAt := 0
	if !s.p.scoredInFull {
		loseAt = s.loseAt(s.packed[group])
	}
	// A count stopped by the bound is a lower bound only, for groups of
	// the same value function: alike groups may differ in price.
	lostKey := key
	if s.bound.expander == "price" {
		lostKey += fmt.Sprintf("|%g", packed.Price)
	}
	if n, ok := s.lostByKey[lostKey]; ok && !estimator.SelectsNodesByName(s.pods) {
		return s.lostOption(packed, n), nil
	}
	o, lost, err := s.scoredOption(ctx, packed, loseAt)
	switch {
	case err != nil:
	case lost:
		s.lostByKey[lostKey] = o.NewNodes
	default:
		s.scoredByKey[key] = o
	}
	return o, err
}

// mayScore reports whether finalEstimate may raise the option's packed
// count: for a partitionable group, or within the scored check's budget
// for pods of several kinds (scoredCheckNeeded).
func (s *optionSearch) mayScore(packed expander.Option) bool {
	if partitionable(s.st.byName[packed.Group]) {
		return true
	}
	if !withinScoredBudget(packed) {
		return false
	}
	if s.severalKinds == nil {
		several := s.st.severalKinds(s.pods)
		s.severalKinds = &several
	}
	return *s.severalKinds
}

// scoredOption is the group's option with the count finalEstimate keeps;
// past loseAt nodes, the option the bound gives at loseAt (it cannot be
// chosen), and lost.
func (s *optionSearch) scoredOption(ctx context.Context, packed expander.Option, loseAt int) (expander.Option, bool, error) {
	snap := s.p.Engine.Snapshot()
	snap.Fork()
	defer snap.Revert()
	res, lost, err := s.st.finalEstimateUnless(ctx, packed.Group, s.pods, withinScoredBudget(packed), loseAt)
	if err != nil {
		return expander.Option{}, false, err
	}
	s.p.scoredSearches++
	if lost {
		s.p.scoredLost++
		lostOption := s.lostOption(packed, loseAt)
		if s.p.Engine.VerifiesShortcuts() {
			if err := s.verifyLost(ctx, packed, lostOption); err != nil {
				return expander.Option{}, false, err
			}
		}
		return lostOption, true, nil
	}
	return s.st.priced(expander.Option{Group: packed.Group, NewNodes: len(res.NewNodes), PodCount: len(res.Placed), Waste: waste(snap, res)}), false, nil
}

// verifyLost searches the option in full and reports when it could have
// been chosen over the one its search was stopped for: the scored option
// must be no better than the bound's (under the verify switch).
func (s *optionSearch) verifyLost(ctx context.Context, packed, lost expander.Option) error {
	snap := s.p.Engine.Snapshot()
	snap.Fork()
	defer snap.Revert()
	res, _, err := s.st.finalEstimateUnless(ctx, packed.Group, s.pods, withinScoredBudget(packed), 0)
	if err != nil {
		return err
	}
	full := s.st.priced(expander.Option{Group: packed.Group, NewNodes: len(res.NewNodes), PodCount: len(res.Placed), Waste: waste(snap, res)})
	if full.PodCount >= s.need && s.value(full) < s.value(lost)-expander.Tie {
		placement.ShortcutDiffers("scored search bound", "group %s: %d new nodes in full (value %.6f), stopped at %d (value %.6f)",
			packed.Group, full.NewNodes, s.value(full), lost.NewNodes, s.value(lost))
	}
	return nil
}

// lostOption is the option the bound gives the packed one at n nodes, a
// count at which it cannot be chosen.
func (s *optionSearch) lostOption(packed expander.Option, n int) expander.Option {
	o := s.st.priced(expander.Option{Group: packed.Group, NewNodes: n, PodCount: packed.PodCount})
	o.Waste = wasteAt(packed, n)
	return o
}

// loseAt is the least count of new nodes at which the packed option's
// group, holding the same pods, can no longer beat the best scored option
// so far (0 when that cannot be told): least-waste's waste and price's
// cost per pod only grow with the count. Waste is a mean over the new
// nodes of their unused shares, so with the same pods on n nodes it is
// 1-(n0/n)(1-w0) of the packed count n0 and waste w0; DaemonSet pods
// would add usage with every node, so their presence gives no bound.
// Options of other firstAvailable ranks are compared first by rank, so
// the bound applies only where all share one.
func (s *optionSearch) loseAt(packed expander.Option) int {
	var incumbent *expander.Option
	rank := -1
	for i, o := range s.options {
		if rank >= 0 && s.rank[o.Group] != rank {
			return 0
		}
		rank = s.rank[o.Group]
		if s.scored[o.Group] && (incumbent == nil || s.value(o) < s.value(*incumbent)) {
			incumbent = &s.options[i]
		}
	}
	if incumbent == nil || packed.NewNodes == 0 || packed.PodCount == 0 {
		return 0
	}
	bar := s.value(*incumbent) + expander.Tie
	room := s.st.stepRoom(s.st.byName[packed.Group])
	for n := packed.NewNodes; n <= room; n++ {
		switch s.bound.expander {
		case "price":
			if !packed.PriceKnown {
				return 0
			}
			if packed.Price/float64(packed.NewNodes)*float64(n)/float64(packed.PodCount) > bar {
				return n
			}
		case "least-waste":
			if len(s.p.DaemonSets) > 0 {
				return 0
			}
			if wasteAt(packed, n) > bar {
				return n
			}
		default:
			return 0
		}
	}
	return 0
}

// wasteAt is the packed option's waste with its pods on n new nodes.
func wasteAt(packed expander.Option, n int) float64 {
	return 1 - float64(packed.NewNodes)/float64(n)*(1-packed.Waste)
}
