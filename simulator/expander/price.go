package expander

import "math"

// cheapest is the price expander: the option whose new nodes cost least
// per pod they take, as CA's price expander ranks the nodes' price over
// the pods' worth. draxr has no price per pod (CA's PodPrice), so every
// pod counts the same. Options without a price rank after every option
// with one (CA leaves out an option it cannot price); when none has a
// price the choice is least-waste's, where CA would choose nothing.
// Equal costs go to the option taking more pods, then by group name.
type cheapest struct{}

func (cheapest) Name() string { return "price" }

// FewerNodesBetter: more nodes for the same pods only cost more.
func (cheapest) FewerNodesBetter() bool { return true }

func (cheapest) Best(options []Option) Option {
	if !anyPriced(options) {
		return leastWaste{}.Best(options)
	}
	return pick(cheapestFilter(options), func(a, b Option) (bool, bool) {
		if a.PodCount != b.PodCount {
			return a.PodCount > b.PodCount, true
		}
		return false, false
	})
}

// cheapestFilter keeps the priced options of the lowest cost per pod, or
// every option when none is priced: the filter then has no opinion and
// the next one of a chain decides, as priority's does when no group
// matches.
func cheapestFilter(options []Option) []Option {
	if !anyPriced(options) {
		return options
	}
	var priced []Option
	for _, o := range options {
		if o.PriceKnown {
			priced = append(priced, o)
		}
	}
	return keepBest(priced, func(o Option) float64 { return -CostPerPod(o) })
}

func anyPriced(options []Option) bool {
	for _, o := range options {
		if o.PriceKnown {
			return true
		}
	}
	return false
}

// CostPerPod is the option's price over the pods it takes; an option
// that takes none is worth nothing at any price.
func CostPerPod(o Option) float64 {
	if o.PodCount <= 0 {
		return math.Inf(1)
	}
	return o.Price / float64(o.PodCount)
}
