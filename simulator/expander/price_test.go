package expander

import (
	"slices"
	"testing"
)

// priced is an option whose new nodes cost price per hour in all.
func priced(group string, nodes, pods int, waste, price float64) Option {
	o := opt(group, nodes, pods, waste)
	o.Price, o.PriceKnown = price, true
	return o
}

func TestPrice(t *testing.T) {
	tests := []struct {
		name     string
		expander string
		options  []Option
		want     string
	}{
		{
			name:     "cheapest per pod wins over less waste",
			expander: "price",
			options:  []Option{priced("big", 1, 8, 0.5, 1.60), priced("small", 4, 8, 0.0, 0.96*4)},
			want:     "big",
		},
		{
			name:     "per pod, not in all: more pods for a little more wins",
			expander: "price",
			options:  []Option{priced("a", 1, 2, 0, 1.0), priced("b", 1, 10, 0, 1.5)},
			want:     "b",
		},
		{
			name:     "equal cost per pod: more pods wins",
			expander: "price",
			options:  []Option{priced("a", 1, 4, 0, 1.0), priced("b", 2, 8, 0, 2.0)},
			want:     "b",
		},
		{
			name:     "full tie: first name wins",
			expander: "price",
			options:  []Option{priced("c", 1, 4, 0.1, 1.0), priced("a", 1, 4, 0.3, 1.0), priced("b", 1, 4, 0.2, 1.0)},
			want:     "a",
		},
		{
			name:     "a free group is cheapest",
			expander: "price",
			options:  []Option{priced("paid", 1, 4, 0, 0.01), priced("free", 3, 4, 0.9, 0)},
			want:     "free",
		},
		{
			name:     "an unpriced group loses to any priced one",
			expander: "price",
			options:  []Option{opt("unknown", 1, 40, 0), priced("dear", 10, 4, 0.9, 100)},
			want:     "dear",
		},
		{
			name:     "no price at all: least-waste decides",
			expander: "price",
			options:  []Option{opt("a", 1, 4, 0.5), opt("b", 2, 4, 0.1), opt("c", 1, 4, 0.3)},
			want:     "b",
		},
		{
			name:     "chain: price among the top priority",
			expander: "priority,price",
			options:  []Option{priced("cpu", 1, 4, 0, 0.1), priced("gpu-t4", 1, 4, 0, 0.9), priced("gpu-l4", 1, 4, 0, 0.7)},
			want:     "gpu-l4",
		},
		{
			name:     "chain: price first, least-waste breaks its tie",
			expander: "price,least-waste",
			options:  []Option{priced("a", 1, 4, 0.4, 1), priced("b", 1, 4, 0.2, 1), priced("c", 1, 4, 0, 2)},
			want:     "b",
		},
		{
			name:     "chain: unpriced options are dropped before the next filter",
			expander: "price,most-pods",
			options:  []Option{opt("many", 1, 40, 0), priced("x", 1, 4, 0, 1), priced("y", 1, 5, 0, 1.25)},
			want:     "y",
		},
		{
			name:     "chain: no price at all passes every option on",
			expander: "price,most-pods",
			options:  []Option{opt("a", 1, 4, 0), opt("b", 1, 6, 0), opt("c", 1, 5, 0)},
			want:     "b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.expander, []byte(priorities), 1)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name() != tt.expander {
				t.Errorf("Name() = %q, want %q", s.Name(), tt.expander)
			}
			for i := 0; i < 20; i++ { // chains break leftover ties at random
				if got := s.Best(tt.options).Group; got != tt.want {
					t.Fatalf("%s chose %s, want %s", s.Name(), got, tt.want)
				}
			}
		})
	}
}

func TestPriceIsNamed(t *testing.T) {
	if !slices.Contains(Names(), "price") {
		t.Errorf("Names() = %v, want price among them", Names())
	}
	if _, err := New("price,price", nil, 1); err == nil {
		t.Error("price named twice: want an error")
	}
}

func TestUsesPrice(t *testing.T) {
	for name, want := range map[string]bool{
		"price": true, "priority, price": true, "price,least-waste": true,
		"least-waste": false, "": false, "priority,most-pods": false,
	} {
		if got := UsesPrice(name); got != want {
			t.Errorf("UsesPrice(%q) = %v, want %v", name, got, want)
		}
	}
}
