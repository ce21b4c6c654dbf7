package devicepools

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// CounterProblem is a device whose counter consumption its pool cannot
// satisfy. The allocator refuses the whole pool then ("invalid resource
// pools"), so every pod asking for any of its devices stays pending.
type CounterProblem struct {
	// Slice is the index of the spec holding the device, Field the path
	// within that spec (devices[3].consumesCounters[0].counterSet).
	Slice   int
	Device  string
	Field   string
	Message string
	Fix     string
}

// CounterProblems checks one pool's slice specs (all of one driver and
// pool; counter sets may be declared in any of them): a device consuming
// an undeclared counter set or counter, or more of a counter than the
// set holds.
func CounterProblems(specs []resourceapi.ResourceSliceSpec) []CounterProblem {
	declared := map[string]map[string]resourceapi.Counter{}
	for _, s := range specs {
		for _, cs := range s.SharedCounters {
			declared[cs.Name] = cs.Counters
		}
	}
	setNames := make([]string, 0, len(declared))
	for n := range declared {
		setNames = append(setNames, n)
	}
	sort.Strings(setNames)
	var out []CounterProblem
	for si, s := range specs {
		for di, d := range s.Devices {
			for ci, c := range d.ConsumesCounters {
				field := fmt.Sprintf("devices[%d].consumesCounters[%d]", di, ci)
				set, ok := declared[c.CounterSet]
				if !ok {
					out = append(out, CounterProblem{Slice: si, Device: d.Name, Field: field + ".counterSet",
						Message: fmt.Sprintf("device %s consumes counter set %q, which no slice of its pool declares in spec.sharedCounters (declared: %s)", d.Name, c.CounterSet, list(setNames)),
						Fix:     "name a declared counter set, or publish the set in spec.sharedCounters of a slice of the same pool"})
					continue
				}
				names := make([]string, 0, len(c.Counters))
				for n := range c.Counters {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					have, ok := set[n]
					want := c.Counters[n].Value
					switch {
					case !ok:
						out = append(out, CounterProblem{Slice: si, Device: d.Name, Field: fmt.Sprintf("%s.counters[%s]", field, n),
							Message: fmt.Sprintf("device %s consumes counter %q of counter set %s, which the set does not declare", d.Name, n, c.CounterSet),
							Fix:     fmt.Sprintf("declare counter %q in counter set %s, or drop it from the device", n, c.CounterSet)})
					case want.Cmp(have.Value) > 0:
						out = append(out, CounterProblem{Slice: si, Device: d.Name, Field: fmt.Sprintf("%s.counters[%s]", field, n),
							Message: fmt.Sprintf("device %s consumes %s of counter %s in counter set %s, which holds %s: it can never be allocated", d.Name, want.String(), n, c.CounterSet, have.Value.String()),
							Fix:     fmt.Sprintf("lower the device's consumption to at most %s or raise the set's counter", have.Value.String())})
					}
				}
			}
		}
	}
	return out
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// TemplateCounterProblems checks a node group template's slice specs: on a
// new node each driver publishes one pool, so the specs are checked per
// driver, and each problem's Slice indexes specs.
func TemplateCounterProblems(specs []resourceapi.ResourceSliceSpec) []CounterProblem {
	byDriver := map[string][]int{}
	var drivers []string
	for i, spec := range specs {
		if byDriver[spec.Driver] == nil {
			drivers = append(drivers, spec.Driver)
		}
		byDriver[spec.Driver] = append(byDriver[spec.Driver], i)
	}
	var out []CounterProblem
	for _, driver := range drivers {
		idx := byDriver[driver]
		pool := make([]resourceapi.ResourceSliceSpec, len(idx))
		for k, i := range idx {
			pool[k] = specs[i]
		}
		for _, p := range CounterProblems(pool) {
			p.Slice = idx[p.Slice]
			out = append(out, p)
		}
	}
	return out
}
