package scaleup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

func pricedGroup(name string, cpu, memGiB int64, price nodegroup.Price) *nodegroup.NodeGroup {
	return &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodegroup.Spec{MaxSize: 100, Price: price, Template: *fx.Node("template", cpu, memGiB, nil)}}
}

// The price expander gets each option's price from its group's
// spec.price: the 16 pods need 4 small nodes or 1 big one, and the
// cheaper way is chosen whatever the names and the waste say.
func TestPlanWithPrices(t *testing.T) {
	tests := []struct {
		name       string
		expander   string
		smallPrice nodegroup.Price
		bigPrice   nodegroup.Price
		wantGroup  string
		wantNodes  int
	}{
		{name: "four small nodes are cheaper", expander: "price", smallPrice: "0.30", bigPrice: "1.50", wantGroup: "small", wantNodes: 4},
		{name: "one big node is cheaper", expander: "price", smallPrice: "0.40", bigPrice: "1.50", wantGroup: "big", wantNodes: 1},
		{name: "only the small group is priced", expander: "price", smallPrice: "9", wantGroup: "small", wantNodes: 4},
		{name: "no prices: least-waste's choice", expander: "price", wantGroup: "big", wantNodes: 1},
		{name: "in a chain", expander: "most-pods,price", smallPrice: "0.30", bigPrice: "1.50", wantGroup: "small", wantNodes: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlanner(t, snapshot.New(), pricedGroup("big", 32, 128, tt.bigPrice), pricedGroup("small", 8, 32, tt.smallPrice))
			exp, err := expander.New(tt.expander, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			p.Expander = exp
			plan, err := p.Plan(replicas("web", 16, 2000, nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != tt.wantGroup || plan.ScaleUps[0].NewNodes != tt.wantNodes {
				t.Fatalf("scale-ups %+v, want %d nodes of %s", plan.ScaleUps, tt.wantNodes, tt.wantGroup)
			}
		})
	}
}
