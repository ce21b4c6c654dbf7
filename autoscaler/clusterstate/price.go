package clusterstate

import (
	"errors"
	"fmt"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/nodegroup"
)

// withPrice sets g's spec.price to the provider's node price for ng
// (cloudprovider.NodePrice). A group the provider cannot price stays
// unpriced, so the price expander ranks it after priced groups and a
// pricing failure never stops a scale-up; the error says why, for the
// caller to report. No price (ErrNotImplemented) is no error.
func withPrice(g *nodegroup.NodeGroup, ng cloudprovider.NodeGroup) error {
	perHour, err := cloudprovider.NodePrice(ng)
	switch {
	case errors.Is(err, cloudprovider.ErrNotImplemented):
		return nil
	case err != nil:
		return fmt.Errorf("node group %s: price: %w", ng.Id(), err)
	}
	g.Spec.Price = nodegroup.PriceOf(perHour)
	return nil
}
