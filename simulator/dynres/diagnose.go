package dynres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
)

// ClassGetter looks a DeviceClass up by name (nil when there is none).
type ClassGetter func(name string) *resourceapi.DeviceClass

// WhyNot says which part of a claim an empty node publishing slices can
// never satisfy: the 32-device limit, a request's class or selectors, the
// counter sets its devices share, or a matchAttribute constraint. "" when
// none of these rules it out (the scheduler's own reason then stands).
// The allocator itself only says "cannot allocate all claims"; a person
// needs to know which request or constraint to change.
func (m *Matcher) WhyNot(spec *resourceapi.ResourceClaimSpec, classes ClassGetter, slices []resourceapi.ResourceSliceSpec) string {
	total := 0
	matching := map[string][]candidate{} // request name -> devices it may get
	for _, req := range spec.Devices.Requests {
		ex := req.Exactly
		if ex == nil {
			continue // firstAvailable: the alternatives are the scheduler's to try
		}
		count := 1
		if ex.AllocationMode == resourceapi.DeviceAllocationModeExactCount && ex.Count > 0 {
			count = int(ex.Count)
		}
		total += count
		class := classes(ex.DeviceClassName)
		if class == nil {
			return fmt.Sprintf("request %s: DeviceClass %s does not exist", req.Name, ex.DeviceClassName)
		}
		var devs []candidate
		for si := range slices {
			for di := range slices[si].Devices {
				d := &slices[si].Devices[di]
				ok, err := m.Matches(class, slices[si].Driver, d)
				if err == nil && ok {
					ok, err = m.selectorsMatch(ex.Selectors, slices[si].Driver, d)
				}
				if err != nil {
					return fmt.Sprintf("request %s: %v", req.Name, err)
				}
				if ok {
					devs = append(devs, candidate{driver: slices[si].Driver, device: d})
				}
			}
		}
		if ex.Capacity != nil && len(ex.Capacity.Requests) > 0 && len(devs) > 0 {
			var why string
			if devs, why = withCapacity(devs, ex.Capacity.Requests); len(devs) == 0 {
				return fmt.Sprintf("request %s: %s", req.Name, why)
			}
		}
		matching[req.Name] = devs
		if ex.AllocationMode == resourceapi.DeviceAllocationModeAll {
			continue
		}
		if len(devs) == 0 {
			return fmt.Sprintf("request %s: no device matches DeviceClass %s%s", req.Name, ex.DeviceClassName, selectorsNote(ex.Selectors))
		}
		if len(devs) < count {
			return fmt.Sprintf("request %s asks %d devices of DeviceClass %s%s; a node has %d", req.Name, count, ex.DeviceClassName, selectorsNote(ex.Selectors), len(devs))
		}
		if most, counter := atOnce(devs, slices); most < count {
			return fmt.Sprintf("request %s asks %d devices of DeviceClass %s; they share counter sets, which hold at most %d of them at once (%s)",
				req.Name, count, ex.DeviceClassName, most, counter)
		}
	}
	if total > resourceapi.AllocationResultsMaxSize {
		return fmt.Sprintf("the claim asks %d devices; a claim can be allocated at most %d", total, resourceapi.AllocationResultsMaxSize)
	}
	for i, c := range spec.Devices.Constraints {
		if c.MatchAttribute == nil {
			continue
		}
		if why := matchAttributeRules(spec, c, matching); why != "" {
			return fmt.Sprintf("constraints[%d] matchAttribute %s: %s", i, *c.MatchAttribute, why)
		}
	}
	return ""
}

// withCapacity keeps the devices whose capacity can give what the request
// asks (KEP-5075): each capacity it names declared, at most the device's
// value and within the request policy's largest valid amount; why says,
// naming the field, what the last device refused when none can.
func withCapacity(devs []candidate, requests map[resourceapi.QualifiedName]resource.Quantity) ([]candidate, string) {
	var out []candidate
	why := ""
	names := slices.Sorted(maps.Keys(requests))
	for _, c := range devs {
		refused := ""
		for _, name := range names {
			q := requests[name]
			dc, ok := c.device.Capacity[name]
			switch {
			case !ok:
				refused = fmt.Sprintf("capacity.requests[%s] %s: device %s/%s declares no capacity %s", name, q.String(), c.driver, c.device.Name, name)
			case q.Cmp(dc.Value) > 0:
				refused = fmt.Sprintf("capacity.requests[%s] %s is more than device %s/%s has (%s)", name, q.String(), c.driver, c.device.Name, dc.Value.String())
			default:
				if most := policyMax(dc.RequestPolicy); most != nil && q.Cmp(*most) > 0 {
					refused = fmt.Sprintf("capacity.requests[%s] %s is more than device %s/%s's request policy allows (%s)",
						name, q.String(), c.driver, c.device.Name, most.String())
				}
			}
			if refused != "" {
				break
			}
		}
		if refused == "" {
			out = append(out, c)
		} else {
			why = refused
		}
	}
	return out, why
}

// policyMax is the largest amount a request policy allows, nil for no
// bound of its own.
func policyMax(p *resourceapi.CapacityRequestPolicy) *resource.Quantity {
	switch {
	case p == nil:
		return nil
	case len(p.ValidValues) > 0:
		most := p.ValidValues[0]
		for _, v := range p.ValidValues[1:] {
			if v.Cmp(most) > 0 {
				most = v
			}
		}
		return &most
	case p.ValidRange != nil && p.ValidRange.Max != nil:
		return p.ValidRange.Max
	}
	return nil
}

type candidate struct {
	driver string
	device *resourceapi.Device
}

func (m *Matcher) selectorsMatch(sels []resourceapi.DeviceSelector, driver string, d *resourceapi.Device) (bool, error) {
	for i, sel := range sels {
		if sel.CEL == nil {
			continue
		}
		prog := m.cache.GetOrCompile(sel.CEL.Expression)
		if prog.Error != nil {
			return false, fmt.Errorf("selectors[%d].cel.expression: %s", i, prog.Error.Detail)
		}
		ok, _, err := prog.DeviceMatches(context.Background(), cel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
			Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			return false, fmt.Errorf("selectors[%d]: %w", i, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func selectorsNote(sels []resourceapi.DeviceSelector) string {
	if len(sels) == 0 {
		return ""
	}
	return " and the request's selectors"
}

// atOnce is an upper bound on how many of devs an empty node can
// allocate together, from their counter sets (never below what fits, so a
// count above it is impossible), and the counter bounding it. Devices
// consuming no counter are not bounded.
func atOnce(devs []candidate, slices []resourceapi.ResourceSliceSpec) (int, string) {
	caps := map[string]map[string]float64{} // driver/set -> counter -> capacity
	for _, s := range slices {
		for _, cs := range s.SharedCounters {
			c := map[string]float64{}
			for n, v := range cs.Counters {
				c[n] = v.Value.AsApproximateFloat64()
			}
			caps[s.Driver+"/"+cs.Name] = c
		}
	}
	type setUse struct {
		devices int
		minUse  map[string]float64 // counter -> least any device uses; absent: some device uses none
		minSum  float64            // least total use of the set's counters by one device
	}
	uses := map[string]*setUse{}
	unbounded := 0
	for _, c := range devs {
		if len(c.device.ConsumesCounters) == 0 {
			unbounded++
			continue
		}
		for _, use := range c.device.ConsumesCounters {
			key := c.driver + "/" + use.CounterSet
			u := uses[key]
			sum := 0.0
			for _, v := range use.Counters {
				sum += v.Value.AsApproximateFloat64()
			}
			if u == nil {
				u = &setUse{minUse: map[string]float64{}, minSum: sum}
				for n, v := range use.Counters {
					u.minUse[n] = v.Value.AsApproximateFloat64()
				}
				uses[key] = u
			}
			u.devices++
			u.minSum = min(u.minSum, sum)
			for n, least := range u.minUse {
				v, ok := use.Counters[n]
				if !ok {
					delete(u.minUse, n)
					continue
				}
				u.minUse[n] = min(least, v.Value.AsApproximateFloat64())
			}
		}
	}
	bound, by := unbounded, ""
	keys := make([]string, 0, len(uses))
	for k := range uses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		u := uses[key]
		k := u.devices
		total := 0.0
		for _, v := range caps[key] {
			total += v
		}
		set := key[strings.Index(key, "/")+1:]
		counters := make([]string, 0, len(u.minUse))
		for n := range u.minUse {
			counters = append(counters, n)
		}
		sort.Strings(counters)
		for _, n := range counters {
			if least := u.minUse[n]; least > 0 && int(caps[key][n]/least) < k {
				k, by = int(caps[key][n]/least), "counter "+n+" of "+set
			}
		}
		if u.minSum > 0 && int(total/u.minSum) < k {
			k, by = int(total/u.minSum), "the counters of "+set+" together"
		}
		bound += k
	}
	return bound, by
}

// matchAttributeRules says why no value of the constraint's attribute
// is shared by enough devices for the requests it covers.
func matchAttributeRules(spec *resourceapi.ResourceClaimSpec, c resourceapi.DeviceConstraint, matching map[string][]candidate) string {
	reqs := c.Requests
	if len(reqs) == 0 {
		for _, r := range spec.Devices.Requests {
			reqs = append(reqs, r.Name)
		}
	}
	need := 0
	byValue := map[string]int{}
	for _, name := range reqs {
		count := 0
		for _, r := range spec.Devices.Requests {
			if r.Name == name && r.Exactly != nil {
				count = 1
				if r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && r.Exactly.Count > 0 {
					count = int(r.Exactly.Count)
				}
			}
		}
		need += count
		for _, cand := range matching[name] {
			if v, ok := attributeValue(cand, string(*c.MatchAttribute)); ok {
				byValue[v]++
			}
		}
	}
	if need < 2 {
		return "" // one device always matches itself
	}
	most, values := 0, make([]string, 0, len(byValue))
	for v, n := range byValue {
		values = append(values, v)
		most = max(most, n)
	}
	if most >= need {
		return ""
	}
	sort.Strings(values)
	if len(values) == 0 {
		return fmt.Sprintf("no device the requests may get has the attribute; the requests need %d devices sharing it", need)
	}
	return fmt.Sprintf("at most %d of the devices the requests may get share one value (values: %s); the requests need %d",
		most, strings.Join(values, ", "), need)
}

// attributeValue reads a fully qualified attribute as the allocator does:
// in the device's driver's own domain the short name is the same
// attribute.
func attributeValue(c candidate, qualified string) (string, bool) {
	a, ok := c.device.Attributes[resourceapi.QualifiedName(qualified)]
	if !ok {
		domain, id, found := strings.Cut(qualified, "/")
		if !found || domain != c.driver {
			return "", false
		}
		if a, ok = c.device.Attributes[resourceapi.QualifiedName(id)]; !ok {
			return "", false
		}
	}
	switch {
	case a.StringValue != nil:
		return *a.StringValue, true
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue), true
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue), true
	case a.VersionValue != nil:
		return *a.VersionValue, true
	}
	return "", false
}
