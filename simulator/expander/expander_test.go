package expander

import (
	"strings"
	"testing"
)

// opt is shorthand for an option: group, new nodes, pods taken, waste.
func opt(group string, nodes, pods int, waste float64) Option {
	return Option{Group: group, NewNodes: nodes, PodCount: pods, Waste: waste}
}

const priorities = `
10:
  - gpu-.*
50:
  - gpu-a100
  - gpu-h100-(spot|ondemand)
`

func TestStrategies(t *testing.T) {
	tests := []struct {
		name       string
		expander   string
		priorities string
		options    []Option
		want       string
	}{
		{
			name:     "least-waste picks the lowest waste",
			expander: "least-waste",
			options:  []Option{opt("a", 1, 4, 0.5), opt("b", 2, 4, 0.1), opt("c", 1, 8, 0.3)},
			want:     "b",
		},
		{
			name:     "least-waste: equal waste, more pods wins",
			expander: "least-waste",
			options:  []Option{opt("a", 1, 4, 0.25), opt("b", 1, 6, 0.25)},
			want:     "b",
		},
		{
			name:     "least-waste: full tie, first name wins",
			expander: "least-waste",
			options:  []Option{opt("c", 1, 4, 0.25), opt("a", 1, 4, 0.25), opt("b", 1, 4, 0.25)},
			want:     "a",
		},
		{
			name:     "empty name is least-waste",
			expander: "",
			options:  []Option{opt("a", 1, 4, 0.5), opt("b", 2, 4, 0.1)},
			want:     "b",
		},
		{
			name:     "most-pods picks the most pods",
			expander: "most-pods",
			options:  []Option{opt("a", 1, 4, 0), opt("b", 3, 9, 0.9), opt("c", 2, 8, 0)},
			want:     "b",
		},
		{
			name:     "most-pods: equal pods, fewer nodes wins",
			expander: "most-pods",
			options:  []Option{opt("a", 3, 8, 0), opt("b", 2, 8, 0.5)},
			want:     "b",
		},
		{
			name:     "most-pods: full tie, first name wins",
			expander: "most-pods",
			options:  []Option{opt("z", 2, 8, 0), opt("m", 2, 8, 0)},
			want:     "m",
		},
		{
			name:       "priority: highest matching priority wins over less waste",
			expander:   "priority",
			priorities: priorities,
			options:    []Option{opt("cpu", 1, 4, 0), opt("gpu-t4", 1, 4, 0.1), opt("gpu-a100", 1, 4, 0.8)},
			want:       "gpu-a100",
		},
		{
			name:       "priority: regexps match the whole name",
			expander:   "priority",
			priorities: priorities,
			options:    []Option{opt("gpu-a100-old", 1, 4, 0.5), opt("gpu-h100-spot", 1, 4, 0.9)},
			want:       "gpu-h100-spot",
		},
		{
			name:       "priority: equal priorities fall back to least-waste",
			expander:   "priority",
			priorities: priorities,
			options:    []Option{opt("gpu-t4", 1, 4, 0.6), opt("gpu-l4", 1, 4, 0.2), opt("cpu", 1, 4, 0)},
			want:       "gpu-l4",
		},
		{
			name:       "priority: groups matching nothing lose to any match",
			expander:   "priority",
			priorities: priorities,
			options:    []Option{opt("cpu", 1, 40, 0), opt("gpu-t4", 4, 4, 0.9)},
			want:       "gpu-t4",
		},
		{
			name:       "priority: nothing matches, least-waste over all",
			expander:   "priority",
			priorities: priorities,
			options:    []Option{opt("cpu-big", 1, 4, 0.4), opt("cpu-small", 1, 4, 0.2)},
			want:       "cpu-small",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.expander, []byte(tt.priorities), 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Best(tt.options).Group; got != tt.want {
				t.Errorf("%s chose %s, want %s", s.Name(), got, tt.want)
			}
		})
	}
}

// With a fixed seed the random expander repeats its choices whatever the
// order of the options, and over many loops it picks every option.
func TestRandomIsSeeded(t *testing.T) {
	options := []Option{opt("a", 1, 1, 0), opt("b", 1, 1, 0), opt("c", 1, 1, 0), opt("d", 1, 1, 0)}
	reversed := []Option{options[3], options[2], options[1], options[0]}
	tests := []struct {
		name         string
		seedA, seedB int64
		wantSame     bool
	}{
		{name: "same seed, same choices", seedA: 7, seedB: 7, wantSame: true},
		{name: "other seed, other choices", seedA: 7, seedB: 8, wantSame: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := New("random", nil, tt.seedA)
			b, _ := New("random", nil, tt.seedB)
			var seqA, seqB []string
			picked := map[string]int{}
			for i := 0; i < 200; i++ {
				ga, gb := a.Best(options).Group, b.Best(reversed).Group
				seqA, seqB = append(seqA, ga), append(seqB, gb)
				picked[ga]++
			}
			if same := strings.Join(seqA, "") == strings.Join(seqB, ""); same != tt.wantSame {
				t.Errorf("sequences equal = %v, want %v:\n%v\n%v", same, tt.wantSame, seqA[:20], seqB[:20])
			}
			if len(picked) != len(options) {
				t.Errorf("picked %v in 200 loops, want every option", picked)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name       string
		expander   string
		priorities string
		wantErr    string
	}{
		{name: "unknown name", expander: "grpc", wantErr: `unknown expander "grpc"`},
		{name: "priority without config", expander: "priority", wantErr: "--expander=priority needs --expander-priorities"},
		{name: "priority: not YAML", expander: "priority", priorities: "10: [a\n", wantErr: "expander priorities:"},
		{name: "priority: key not an integer", expander: "priority", priorities: "high:\n  - gpu-.*\n", wantErr: `key "high": must be an integer priority`},
		{name: "priority: bad regexp names its place", expander: "priority", priorities: "10:\n  - ok\n  - gpu-(\n", wantErr: "expander priorities: 10[1]:"},
		{name: "priority: list expected", expander: "priority", priorities: "10: gpu\n", wantErr: "expander priorities:"},
		{name: "chain: unknown entry", expander: "priority,cheapest", priorities: priorities, wantErr: `--expander=priority,cheapest: unknown expander "cheapest"`},
		{name: "chain: empty entry", expander: "priority,,least-waste", priorities: priorities, wantErr: "--expander=priority,,least-waste: entry 2 is empty"},
		{name: "chain: trailing comma", expander: "most-pods,", wantErr: "entry 2 is empty"},
		{name: "chain: name twice", expander: "least-waste,most-pods,least-waste", wantErr: `"least-waste" is named more than once`},
		{name: "chain: random not last", expander: "random,least-waste", wantErr: `"least-waste" comes after "random"`},
		{name: "chain: bad priority config names the chain", expander: "priority,least-waste", priorities: "x: [a]\n", wantErr: `--expander=priority,least-waste: expander priorities: key "x"`},
		{name: "chain: priority without config", expander: "least-waste,priority", wantErr: "needs --expander-priorities"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.expander, []byte(tt.priorities), 1)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New(%q) error = %v, want it to contain %q", tt.expander, err, tt.wantErr)
			}
		})
	}
}

func TestChains(t *testing.T) {
	tests := []struct {
		name     string
		expander string
		options  []Option
		// want is the only acceptable choice; wantAnyOf lists the tied
		// options a random tie-break may pick, each of which must occur.
		want      string
		wantAnyOf []string
	}{
		{
			name:     "priority first, then least-waste among the top priority",
			expander: "priority,least-waste",
			options:  []Option{opt("cpu", 1, 4, 0), opt("gpu-t4", 1, 4, 0.6), opt("gpu-l4", 1, 4, 0.2)},
			want:     "gpu-l4",
		},
		{
			name:     "one option after priority decides at once",
			expander: "priority,least-waste",
			options:  []Option{opt("gpu-t4", 1, 4, 0.1), opt("gpu-a100", 1, 4, 0.9)},
			want:     "gpu-a100",
		},
		{
			name:     "order matters: least-waste first",
			expander: "least-waste,priority",
			options:  []Option{opt("cpu", 1, 4, 0), opt("gpu-a100", 1, 4, 0.9)},
			want:     "cpu",
		},
		{
			name:     "most-pods then least-waste",
			expander: "most-pods,least-waste",
			options:  []Option{opt("a", 1, 8, 0.5), opt("b", 2, 8, 0.1), opt("c", 1, 4, 0)},
			want:     "b",
		},
		{
			name:     "least-waste then most-pods",
			expander: "least-waste,most-pods",
			options:  []Option{opt("a", 1, 8, 0.1), opt("b", 2, 9, 0.1), opt("c", 1, 20, 0.4)},
			want:     "b",
		},
		{
			name:      "ties left after the chain are broken at random",
			expander:  "priority,least-waste",
			options:   []Option{opt("gpu-t4", 1, 4, 0.2), opt("gpu-l4", 1, 4, 0.2), opt("gpu-a10", 1, 4, 0.2), opt("cpu", 1, 4, 0)},
			wantAnyOf: []string{"gpu-a10", "gpu-l4", "gpu-t4"},
		},
		{
			name:      "random last picks among the survivors only",
			expander:  "priority,random",
			options:   []Option{opt("gpu-h100-spot", 1, 4, 0.9), opt("gpu-a100", 1, 4, 0.5), opt("gpu-t4", 1, 4, 0)},
			wantAnyOf: []string{"gpu-a100", "gpu-h100-spot"},
		},
		{
			name:      "priority matching nothing keeps every option",
			expander:  "priority,most-pods",
			options:   []Option{opt("x", 1, 4, 0), opt("y", 1, 6, 0), opt("z", 1, 6, 0.5)},
			wantAnyOf: []string{"y", "z"},
		},
		{
			name:     "spaces around names are allowed",
			expander: "priority, least-waste",
			options:  []Option{opt("gpu-t4", 1, 4, 0.6), opt("gpu-l4", 1, 4, 0.2)},
			want:     "gpu-l4",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.expander, []byte(priorities), 3)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name() != tt.expander {
				t.Errorf("Name() = %q, want %q", s.Name(), tt.expander)
			}
			picked := map[string]int{}
			for i := 0; i < 100; i++ {
				picked[s.Best(tt.options).Group]++
			}
			if tt.want != "" {
				if picked[tt.want] != 100 {
					t.Errorf("picked %v, want always %s", picked, tt.want)
				}
				return
			}
			for _, g := range tt.wantAnyOf {
				if picked[g] == 0 {
					t.Errorf("picked %v, want each of %v at some point", picked, tt.wantAnyOf)
				}
			}
			if len(picked) != len(tt.wantAnyOf) {
				t.Errorf("picked %v, want only %v", picked, tt.wantAnyOf)
			}
		})
	}
}

// Two chains built with the same seed make the same random tie-breaks.
func TestChainSeeded(t *testing.T) {
	options := []Option{opt("a", 1, 4, 0.2), opt("b", 1, 4, 0.2), opt("c", 1, 4, 0.2)}
	a, _ := New("most-pods,least-waste", nil, 42)
	b, _ := New("most-pods,least-waste", nil, 42)
	for i := 0; i < 50; i++ {
		if ga, gb := a.Best(options).Group, b.Best(options).Group; ga != gb {
			t.Fatalf("loop %d: %s vs %s with the same seed", i, ga, gb)
		}
	}
}
