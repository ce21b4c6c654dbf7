package cloudprovider

import (
	"fmt"
	"math"

	"draxr.dev/draxr/simulator/nodegroup"
)

// Pricer is the optional NodeGroup interface of groups that know what a
// node costs (CA's PricingModel.NodePrice, for one node of the group's
// template over the next hour). It is not part of NodeGroup so that a
// provider without prices implements nothing.
type Pricer interface {
	// NodePrice is one new node's price per hour, in whatever currency
	// all the provider's groups share; ErrNotImplemented when unknown.
	NodePrice() (float64, error)
}

// NodePrice is ng's node price per hour, ErrNotImplemented when ng is no
// Pricer or cannot tell. A negative price is refused: it would make
// every node of the group "cheaper than free"; so is NaN or infinity.
func NodePrice(ng NodeGroup) (float64, error) {
	p, ok := ng.(Pricer)
	if !ok {
		return 0, ErrNotImplemented
	}
	price, err := p.NodePrice()
	if err != nil {
		return 0, err
	}
	if price < 0 || math.IsNaN(price) || math.IsInf(price, 0) {
		return 0, fmt.Errorf("node price %v is not a number >= 0", price)
	}
	return price, nil
}

// SpecPrice is the Pricer answer of a group described by a NodeGroup
// (spec.price, or the annotation it was read from).
func SpecPrice(g *nodegroup.NodeGroup) (float64, error) {
	price, known, err := g.Spec.Price.Value()
	switch {
	case err != nil:
		return 0, err
	case !known:
		return 0, ErrNotImplemented
	}
	return price, nil
}
