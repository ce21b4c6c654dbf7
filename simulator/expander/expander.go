// Package expander chooses which node group to grow when several could
// help the pending pods. Every strategy breaks ties by group name, so plans
// are deterministic.
package expander

import (
	"fmt"
	"math/rand"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Option is one node group's answer to the pending pods.
type Option struct {
	Group    string
	NewNodes int
	// PodCount is how many pending pods the new nodes take.
	PodCount int
	// Waste is the mean unused share of CPU, memory and the DRA devices of
	// the classes the pods use, over the new nodes (0 = fully used).
	Waste float64
	// Price is what the new nodes cost per hour (NewNodes times the
	// group's node price); meaningful only when PriceKnown.
	Price      float64
	PriceKnown bool
}

// FewerNodesBetter reports whether the strategy never likes an option
// better for more nodes taking the same pods (least-waste, price): an
// option with a lower bound on its node count then bounds how well the
// option can do.
func FewerNodesBetter(s Strategy) bool {
	f, ok := s.(interface{ FewerNodesBetter() bool })
	return ok && f.FewerNodesBetter()
}

// Strategy picks the best option; options is never empty.
type Strategy interface {
	Name() string
	Best(options []Option) Option
}

// Names lists the strategies New accepts.
func Names() []string { return []string{"least-waste", "most-pods", "price", "priority", "random"} }

// UsesPrice says whether --expander=name (a name or a comma chain) has
// the price expander, so the caller knows to read the groups' prices.
func UsesPrice(name string) bool {
	for _, entry := range strings.Split(name, ",") {
		if strings.TrimSpace(entry) == "price" {
			return true
		}
	}
	return false
}

// New returns a strategy by name. priorities is the priority expander's
// config (YAML: priority -> list of group-name regexps), used only by it.
// A comma list ("priority,least-waste") is a chain of filters, as in the
// Cluster Autoscaler; a single name keeps its own deterministic tie-break.
func New(name string, priorities []byte, seed int64) (Strategy, error) {
	return build(name, func() (filter, error) {
		p, err := newPriority(priorities)
		if err != nil {
			return nil, err
		}
		return p.filter, nil
	}, seed)
}

// NewWithPriority is New with the priority expander's choice made by
// prio instead of a config file: it returns the options of the highest
// priority, all of them when it has no opinion, or none when no group may
// be chosen (then Best returns an Option with no Group). The live
// autoscaler passes CA's priority ConfigMap, read at every choice.
func NewWithPriority(name string, prio func(options []Option) []Option, seed int64) (Strategy, error) {
	return build(name, func() (filter, error) { return prio, nil }, seed)
}

func build(name string, prio func() (filter, error), seed int64) (Strategy, error) {
	if strings.Contains(name, ",") {
		return newChain(name, prio, seed)
	}
	switch name {
	case "", "least-waste":
		return leastWaste{}, nil
	case "most-pods":
		return mostPods{}, nil
	case "price":
		return cheapest{}, nil
	case "random":
		return &random{rng: rand.New(rand.NewSource(seed))}, nil
	case "priority":
		f, err := prio()
		if err != nil {
			return nil, err
		}
		return priorityStrategy{f}, nil
	}
	return nil, fmt.Errorf("--expander: unknown expander %q (want one of %v)", name, Names())
}

// priorityStrategy keeps the options of the highest priority, then the
// least waste among them.
type priorityStrategy struct{ filter filter }

func (priorityStrategy) Name() string { return "priority" }

func (p priorityStrategy) Best(options []Option) Option {
	kept := p.filter(options)
	if len(kept) == 0 {
		return Option{}
	}
	return leastWaste{}.Best(kept)
}

// pick returns the option that less ranks first, ties broken by name.
func pick(options []Option, less func(a, b Option) (bool, bool)) Option {
	sorted := append([]Option(nil), options...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if l, decided := less(sorted[i], sorted[j]); decided {
			return l
		}
		return sorted[i].Group < sorted[j].Group
	})
	return sorted[0]
}

// Tie is the margin within which two options' waste, or cost per pod,
// are equal: float sums of the same plan differ in the last bits.
const Tie = 1e-9

type leastWaste struct{}

func (leastWaste) Name() string { return "least-waste" }

// FewerNodesBetter: more nodes for the same pods only add waste.
func (leastWaste) FewerNodesBetter() bool { return true }

func (leastWaste) Best(options []Option) Option {
	return pick(options, func(a, b Option) (bool, bool) {
		if d := a.Waste - b.Waste; d < -Tie || d > Tie {
			return a.Waste < b.Waste, true
		}
		if a.PodCount != b.PodCount {
			return a.PodCount > b.PodCount, true
		}
		return false, false
	})
}

type mostPods struct{}

func (mostPods) Name() string { return "most-pods" }
func (mostPods) Best(options []Option) Option {
	return pick(options, func(a, b Option) (bool, bool) {
		if a.PodCount != b.PodCount {
			return a.PodCount > b.PodCount, true
		}
		if a.NewNodes != b.NewNodes {
			return a.NewNodes < b.NewNodes, true
		}
		return false, false
	})
}

type random struct{ rng *rand.Rand }

func (*random) Name() string { return "random" }
func (r *random) Best(options []Option) Option {
	byName := append([]Option(nil), options...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].Group < byName[j].Group })
	return byName[r.rng.Intn(len(byName))]
}

// priority ranks groups by the highest priority whose regexp matches the
// group name (the Cluster Autoscaler's priority expander config format);
// equal priorities fall back to least-waste.
type priority struct {
	levels []level
}

type level struct {
	priority int
	patterns []*regexp.Regexp
}

func newPriority(config []byte) (*priority, error) {
	if len(config) == 0 {
		return nil, fmt.Errorf("--expander=priority needs --expander-priorities FILE (YAML: priority: [group-name regexps])")
	}
	return parsePriorities(config, true)
}

// ParseConfigMapPriorities parses the priorities key of CA's priority
// expander ConfigMap as CA does: a YAML map of integer priority to
// regexps, each matching anywhere in a node group's name.
func ParseConfigMapPriorities(config string) (*Priorities, error) {
	if strings.TrimSpace(config) == "" {
		return nil, fmt.Errorf("the priorities are empty")
	}
	p, err := parsePriorities([]byte(config), false)
	if err != nil {
		return nil, err
	}
	return &Priorities{p}, nil
}

// Priorities is a parsed priority configuration.
type Priorities struct{ p *priority }

// Of returns the highest priority whose regexps match group.
func (p *Priorities) Of(group string) (int, bool) { return p.p.Of(group) }

// parsePriorities reads priority -> regexps; anchored regexps must match
// the whole group name (draxr's --expander-priorities file), others match
// anywhere in it (CA's ConfigMap).
func parsePriorities(config []byte, anchored bool) (*priority, error) {
	var raw map[string][]string
	unmarshal := yaml.Unmarshal
	if anchored {
		unmarshal = yaml.UnmarshalStrict
	}
	if err := unmarshal(config, &raw); err != nil {
		return nil, fmt.Errorf("expander priorities: %w", err)
	}
	p := &priority{}
	for key, exprs := range raw {
		n, err := strconv.Atoi(key)
		if err != nil {
			return nil, fmt.Errorf("expander priorities: key %q: must be an integer priority", key)
		}
		lv := level{priority: n}
		for i, e := range exprs {
			if anchored {
				e = "^(?:" + e + ")$"
			}
			re, err := regexp.Compile(e)
			if err != nil {
				return nil, fmt.Errorf("expander priorities: %d[%d]: %w", n, i, err)
			}
			lv.patterns = append(lv.patterns, re)
		}
		p.levels = append(p.levels, lv)
	}
	sort.Slice(p.levels, func(i, j int) bool { return p.levels[i].priority > p.levels[j].priority })
	return p, nil
}

// Of returns a group's priority; groups matching nothing rank lowest.
func (p *priority) Of(group string) (int, bool) {
	for _, lv := range p.levels {
		for _, re := range lv.patterns {
			if re.MatchString(group) {
				return lv.priority, true
			}
		}
	}
	return 0, false
}
