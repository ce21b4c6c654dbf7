package scaleup

import "draxr.dev/draxr/simulator/expander"

// nodePrice is one new node of group's price per hour; known is false
// when the group has none (or one that does not parse, which loading
// refuses, so only a caller bypassing validation sees it).
func (st *state) nodePrice(group string) (perHour float64, known bool) {
	g := st.byName[group]
	if g == nil {
		return 0, false
	}
	perHour, known, err := g.Spec.Price.Value()
	return perHour, known && err == nil
}

// priced gives o the price of its new nodes, for the price expander; o
// stays unpriced when its group has no price.
func (st *state) priced(o expander.Option) expander.Option {
	if perHour, known := st.nodePrice(o.Group); known {
		o.Price, o.PriceKnown = float64(o.NewNodes)*perHour, true
	}
	return o
}

// pricedSteps gives o the price of every step of a gang's scale-up, each
// at its own group's price; unpriced when any step's group has none.
func (st *state) pricedSteps(o expander.Option, steps []ScaleUp) expander.Option {
	total := 0.0
	for _, su := range steps {
		perHour, known := st.nodePrice(su.NodeGroup)
		if !known {
			return o
		}
		total += float64(su.NewNodes) * perHour
	}
	o.Price, o.PriceKnown = total, true
	return o
}
