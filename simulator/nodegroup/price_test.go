package nodegroup_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/nodegroup"
)

// A price is read as a number or a string; a bad one is kept as written
// so that Validate names the field and the value.
func TestPriceFromYAML(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		want      float64
		wantKnown bool
		wantErr   string
	}{
		{name: "unset is unknown", yaml: "minSize: 0\nmaxSize: 1\n"},
		{name: "null is unknown", yaml: "price: null\n"},
		{name: "number", yaml: "price: 0.096\n", want: 0.096, wantKnown: true},
		{name: "string", yaml: "price: \"1.5\"\n", want: 1.5, wantKnown: true},
		{name: "zero is a price", yaml: "price: 0\n", want: 0, wantKnown: true},
		{name: "negative", yaml: "price: -0.5\n", wantErr: `spec.price: Invalid value: "-0.5": must be a number >= 0`},
		{name: "not a number", yaml: "price: cheap\n", wantErr: `spec.price: Invalid value: "cheap": must be a number >= 0: one node's price per hour`},
		{name: "not a scalar", yaml: "price: true\n", wantErr: `spec.price: Invalid value: "true"`},
		{name: "infinity", yaml: "price: \"+Inf\"\n", wantErr: `spec.price: Invalid value: "+Inf"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "g"}}
			if err := yaml.UnmarshalStrict([]byte(tt.yaml), &g.Spec); err != nil {
				t.Fatal(err)
			}
			errs := g.Validate()
			if tt.wantErr != "" {
				if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want %q", got, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("Validate() = %v", errs)
			}
			got, known, err := g.Spec.Price.Value()
			if err != nil || known != tt.wantKnown || got != tt.want {
				t.Errorf("Value() = %v, %v, %v; want %v, %v", got, known, err, tt.want, tt.wantKnown)
			}
			if copied := g.DeepCopy(); copied.Spec.Price != g.Spec.Price {
				t.Errorf("DeepCopy price %q, want %q", copied.Spec.Price, g.Spec.Price)
			}
		})
	}
}

func TestPriceOfRoundTrips(t *testing.T) {
	for _, f := range []float64{0, 0.096, 3.06, 1e-7, 40} {
		got, known, err := nodegroup.PriceOf(f).Value()
		if err != nil || !known || got != f {
			t.Errorf("PriceOf(%v).Value() = %v, %v, %v", f, got, known, err)
		}
	}
}
