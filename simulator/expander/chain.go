package expander

import (
	"fmt"
	"math/rand"
	"strings"
)

// filter narrows options to the best ones by one criterion; ties survive,
// so the next filter of a chain can break them.
type filter func(options []Option) []Option

// chain applies filters in order, as the Cluster Autoscaler does for
// --expander=a,b: the first filter to leave one option decides; ties left
// after the last filter are broken at random (seeded).
type chain struct {
	name    string
	filters []filter
	rng     *rand.Rand
}

func (c *chain) Name() string { return c.name }

func (c *chain) Best(options []Option) Option {
	kept := options
	for _, f := range c.filters {
		kept = f(kept)
		switch len(kept) {
		case 0:
			return Option{} // a filter allowed no group (see NewWithPriority)
		case 1:
			return kept[0]
		}
	}
	return (&random{rng: c.rng}).Best(kept)
}

// newChain parses a comma list of strategy names. Each name may appear at
// most once, and random only last: it always leaves one option, so a
// filter after it would never run.
func newChain(list string, prio func() (filter, error), seed int64) (*chain, error) {
	c := &chain{name: list, rng: rand.New(rand.NewSource(seed))}
	seen := map[string]bool{}
	entries := strings.Split(list, ",")
	for i, name := range entries {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return nil, fmt.Errorf("--expander=%s: entry %d is empty", list, i+1)
		case seen[name]:
			return nil, fmt.Errorf("--expander=%s: %q is named more than once; each expander may appear at most once", list, name)
		case i > 0 && strings.TrimSpace(entries[i-1]) == "random":
			return nil, fmt.Errorf("--expander=%s: %q comes after \"random\", which always picks one option, so %q would never be used", list, name, name)
		}
		seen[name] = true
		f, err := filterFor(name, prio, c.rng)
		if err != nil {
			return nil, fmt.Errorf("--expander=%s: %w", list, err)
		}
		c.filters = append(c.filters, f)
	}
	return c, nil
}

func filterFor(name string, prio func() (filter, error), rng *rand.Rand) (filter, error) {
	switch name {
	case "least-waste":
		return leastWasteFilter, nil
	case "most-pods":
		return mostPodsFilter, nil
	case "price":
		return cheapestFilter, nil
	case "random":
		r := &random{rng: rng}
		return func(options []Option) []Option { return []Option{r.Best(options)} }, nil
	case "priority":
		return prio()
	}
	return nil, fmt.Errorf("unknown expander %q (want some of %v)", name, Names())
}

// keepBest returns the options score ranks highest, within Tie.
func keepBest(options []Option, score func(Option) float64) []Option {
	var best []Option
	var top float64
	for _, o := range options {
		s := score(o)
		switch {
		case len(best) == 0 || s > top+Tie:
			best, top = []Option{o}, s
		case s >= top-Tie:
			best = append(best, o)
		}
	}
	return best
}

func leastWasteFilter(options []Option) []Option {
	return keepBest(options, func(o Option) float64 { return -o.Waste })
}

func mostPodsFilter(options []Option) []Option {
	return keepBest(options, func(o Option) float64 { return float64(o.PodCount) })
}

// filter keeps the options of the highest matched priority; when no group
// matches any priority, all options stay.
func (p *priority) filter(options []Option) []Option {
	var top []Option
	best := 0
	for _, o := range options {
		pr, ok := p.Of(o.Group)
		if !ok {
			continue
		}
		switch {
		case len(top) == 0 || pr > best:
			best, top = pr, []Option{o}
		case pr == best:
			top = append(top, o)
		}
	}
	if len(top) == 0 {
		return options
	}
	return top
}
