package clusterstate

import (
	"errors"
	"strings"
	"testing"

	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/simulator/nodegroup"
)

// pricedGroup answers NodePrice; the rest of NodeGroup is not called.
type pricedGroup struct {
	cloudprovider.NodeGroup
	price float64
	err   error
}

func (g pricedGroup) Id() string                  { return "g" }
func (g pricedGroup) NodePrice() (float64, error) { return g.price, g.err }

// unpricedGroup is a group of a provider without prices (no Pricer).
type unpricedGroup struct{ cloudprovider.NodeGroup }

func TestWithPrice(t *testing.T) {
	tests := []struct {
		name    string
		ng      cloudprovider.NodeGroup
		want    nodegroup.Price
		wantErr string
	}{
		{name: "priced", ng: pricedGroup{price: 0.75}, want: "0.75"},
		{name: "free", ng: pricedGroup{price: 0}, want: "0"},
		{name: "no Pricer", ng: unpricedGroup{}},
		{name: "not implemented", ng: pricedGroup{err: cloudprovider.ErrNotImplemented}},
		{name: "a failure leaves it unpriced, with an error", ng: pricedGroup{err: errors.New("down")}, wantErr: "node group g: price: down"},
		{name: "a negative price is refused", ng: pricedGroup{price: -2}, wantErr: "node group g: price: node price -2 is not a number >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &nodegroup.NodeGroup{}
			err := withPrice(g, tt.ng)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if g.Spec.Price != tt.want {
				t.Errorf("price %q, want %q", g.Spec.Price, tt.want)
			}
		})
	}
}
