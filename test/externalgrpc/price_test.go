package externalgrpc

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"draxr.dev/draxr/cloudprovider"
	egrpc "draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/cloudprovider/providertest"
)

func groupByID(t *testing.T, p cloudprovider.Provider, id string) cloudprovider.NodeGroup {
	t.Helper()
	for _, g := range p.NodeGroups() {
		if g.Id() == id {
			return g
		}
	}
	t.Fatalf("no group %s", id)
	return nil
}

// A group's price is the service's PricingNodePrice for its template
// node over the next hour, asked once a loop; a service without prices
// (Unimplemented) leaves it unknown, another failure is an error.
func TestNodePrice(t *testing.T) {
	ngs := providertest.NodeGroups()
	ngs[0].Spec.Price = "2.5" // gpu; plain has none
	e := newEnv(t, ngs, Options{}, egrpc.Options{}, member("gpu", "gpu-0", 8)...)
	for range 2 {
		if price, err := cloudprovider.NodePrice(groupByID(t, e.p, "gpu")); err != nil || price != 2.5 {
			t.Fatalf("gpu: %v, %v; want 2.5", price, err)
		}
		if _, err := cloudprovider.NodePrice(groupByID(t, e.p, "plain")); !errors.Is(err, cloudprovider.ErrNotImplemented) {
			t.Fatalf("plain: %v; want ErrNotImplemented", err)
		}
	}
	if got := e.service.Calls("PricingNodePrice"); got != 2 {
		t.Errorf("PricingNodePrice called %d times in one loop for two groups, want 2", got)
	}

	tests := []struct {
		name    string
		fault   error
		wantErr func(error) bool
	}{
		{name: "the service has no pricing", fault: status.Error(codes.Unimplemented, "no pricing"),
			wantErr: func(err error) bool { return errors.Is(err, cloudprovider.ErrNotImplemented) }},
		{name: "the service fails", fault: status.Error(codes.Unavailable, "down"),
			wantErr: func(err error) bool {
				return err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented) && cloudprovider.CodeOf(err) == "Unavailable"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.service.SetFault("PricingNodePrice", tt.fault)
			defer e.service.SetFault("PricingNodePrice", nil)
			if err := e.p.Refresh(context.Background()); err != nil { // a new loop asks again
				t.Fatal(err)
			}
			if _, err := cloudprovider.NodePrice(groupByID(t, e.p, "gpu")); !tt.wantErr(err) {
				t.Errorf("error %v", err)
			}
		})
	}
}
