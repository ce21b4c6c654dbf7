package doctor

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/scheduler/classes"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/nodegroup"
)

// counters: a device consuming an undeclared counter set or counter, or
// more than its set holds, makes the allocator refuse its whole pool
// ("invalid resource pools"): every pod asking for any device of it
// stays pending. Live pools and group templates are checked alike.
func (d *doctor) counters() {
	type poolKey struct{ driver, pool string }
	pools := map[poolKey][]*resourceapi.ResourceSlice{}
	var keys []poolKey
	for _, s := range d.objs.ResourceSlices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if pools[k] == nil {
			keys = append(keys, k)
		}
		pools[k] = append(pools[k], s)
	}
	for _, k := range keys {
		var newest int64
		for _, s := range pools[k] {
			newest = max(newest, s.Spec.Pool.Generation)
		}
		var current []*resourceapi.ResourceSlice
		var specs []resourceapi.ResourceSliceSpec
		for _, s := range pools[k] {
			if s.Spec.Pool.Generation == newest {
				current = append(current, s)
				specs = append(specs, s.Spec)
			}
		}
		for _, p := range devicepools.CounterProblems(specs) {
			d.add(Finding{Severity: Error, Check: CheckDeviceCounters, Objects: []Object{objectOf("ResourceSlice", current[p.Slice])},
				Message: fmt.Sprintf("ResourceSlice %s: spec.%s: %s; the allocator refuses pool %s of driver %s, so no pod gets any of its devices", current[p.Slice].Name, p.Field, p.Message, k.pool, k.driver),
				Advice:  p.Fix + " (in the driver's configuration)"})
		}
	}
	for _, g := range d.objs.NodeGroups {
		byDriver := map[string][]int{}
		var drivers []string
		for i, s := range g.Spec.ResourceSlices {
			if byDriver[s.Driver] == nil {
				drivers = append(drivers, s.Driver)
			}
			byDriver[s.Driver] = append(byDriver[s.Driver], i)
		}
		for _, driver := range drivers {
			idx := byDriver[driver]
			specs := make([]resourceapi.ResourceSliceSpec, len(idx))
			for i, j := range idx {
				specs[i] = g.Spec.ResourceSlices[j]
			}
			for _, p := range devicepools.CounterProblems(specs) {
				d.add(Finding{Severity: Error, Check: CheckDeviceCounters, Objects: []Object{{Kind: "NodeGroup", Name: g.Name}},
					Message: fmt.Sprintf("node group %s: template spec.resourceSlices[%d].%s: %s; new nodes' pool of driver %s is refused by the allocator, so scale-up never helps pods asking for it", g.Name, idx[p.Slice], p.Field, p.Message, driver),
					Advice:  p.Fix + " (in the group's template slices)"})
			}
		}
	}
}

// allSlices are the live slices and every group's template slices (as a
// new node of the group publishes them).
func (d *doctor) allSlices() []*resourceapi.ResourceSlice {
	out := append([]*resourceapi.ResourceSlice(nil), d.objs.ResourceSlices...)
	for _, g := range d.objs.NodeGroups {
		_, slices := g.NewNode("doctor-" + g.Name)
		out = append(out, slices...)
	}
	return out
}

// classesMatchNothing: a DeviceClass whose selectors match no device of
// any live slice or template is a class no claim can be satisfied from,
// anywhere; CA users meet it after a driver upgrade renames an attribute.
// A class whose selectors fail is reported by classSelectors instead.
func (d *doctor) classesMatchNothing() {
	slices := d.allSlices()
	if len(slices) == 0 {
		return // nothing published at all: every class would be reported
	}
	// A class whose extended resource a device plugin still serves is a
	// migration under way (the class installed before the DRA driver).
	plugin := map[v1.ResourceName]bool{}
	for _, n := range d.objs.Nodes {
		for name, q := range n.Status.Allocatable {
			plugin[name] = plugin[name] || !q.IsZero()
		}
	}
	for _, g := range d.objs.NodeGroups {
		for _, list := range []v1.ResourceList{g.Spec.Template.Status.Allocatable, g.Spec.Template.Status.Capacity} {
			for name, q := range list {
				plugin[name] = plugin[name] || !q.IsZero()
			}
		}
	}
	for _, c := range d.sortedClasses() {
		if d.matcher.ClassError(c) != nil || d.matching(c, slices) > 0 {
			continue
		}
		if c.Spec.ExtendedResourceName != nil && plugin[v1.ResourceName(*c.Spec.ExtendedResourceName)] {
			continue
		}
		d.add(Finding{Severity: Warning, Check: CheckClassMatchesNothing, Objects: []Object{objectOf("DeviceClass", c)},
			Message: fmt.Sprintf("DeviceClass %s: spec.selectors match no device of any ResourceSlice or node group template; claims and extended resources naming it are never satisfied and no scale-up helps them", c.Name),
			Advice:  "check the selectors against the attributes the driver publishes now (a driver upgrade may have renamed one), or give a node group template slices with such devices"})
	}
}

// missingClasses: a claim, claim template or pod's extended resource
// naming a DeviceClass that does not exist never allocates.
func (d *doctor) missingClasses() {
	exists := map[string]bool{}
	for _, c := range d.objs.DeviceClasses {
		exists[c.Name] = true
	}
	check := func(obj Object, field string, requests []resourceapi.DeviceRequest) {
		for i, r := range requests {
			var names []string
			path := []string{}
			if r.Exactly != nil {
				names, path = append(names, r.Exactly.DeviceClassName), append(path, fmt.Sprintf("%s.requests[%d].exactly.deviceClassName", field, i))
			}
			for j, sub := range r.FirstAvailable {
				names, path = append(names, sub.DeviceClassName), append(path, fmt.Sprintf("%s.requests[%d].firstAvailable[%d].deviceClassName", field, i, j))
			}
			for k, n := range names {
				if n == "" || exists[n] {
					continue
				}
				d.add(Finding{Severity: Error, Check: CheckClassMissing, Objects: []Object{obj},
					Message: fmt.Sprintf("%s: %s: DeviceClass %q does not exist; the request is never allocated", obj, path[k], n),
					Advice:  fmt.Sprintf("create DeviceClass %s (the driver's chart installs it) or name an existing class", n)})
			}
		}
	}
	for _, c := range d.objs.ResourceClaims {
		if c.Status.Allocation == nil {
			check(objectOf("ResourceClaim", c), "spec.devices", c.Spec.Devices.Requests)
		}
	}
	for _, t := range d.objs.ResourceClaimTemplates {
		check(objectOf("ResourceClaimTemplate", t), "spec.spec.devices", t.Spec.Spec.Devices.Requests)
	}
	for _, p := range d.objs.PendingPods {
		seen := map[string]bool{}
		obj := objectOf("Pod", p)
		for _, list := range []struct {
			field string
			ctrs  []v1.Container
		}{{"spec.initContainers", p.Spec.InitContainers}, {"spec.containers", p.Spec.Containers}} {
			for i, ctr := range list.ctrs {
				for name := range ctr.Resources.Requests {
					class, ok := strings.CutPrefix(string(name), classes.ImplicitPrefix)
					if !ok || exists[class] || seen[class] {
						continue
					}
					seen[class] = true
					d.add(Finding{Severity: Error, Check: CheckClassMissing, Objects: []Object{obj},
						Message: fmt.Sprintf("%s: %s[%d].resources.requests[%s] (container %s): DeviceClass %q does not exist; no node offers this extended resource", obj, list.field, i, name, ctr.Name, class),
						Advice:  fmt.Sprintf("create DeviceClass %s or request the resource name of an existing class", class)})
				}
			}
		}
	}
}

// groupDevicesDiffer: nodes of one group are expected to publish the
// same devices (CA's template and draxr's copied template assume it); a
// pool that differs from node to node means the group's template speaks
// for some of its nodes only.
func (d *doctor) groupDevicesDiffer() {
	byGroup := map[string][]string{}
	for _, n := range d.objs.Nodes {
		if g := nodegroup.Group(n); g != "" {
			byGroup[g] = append(byGroup[g], n.Name)
		}
	}
	shape := map[string]map[string]string{} // node -> driver -> devices
	for _, s := range d.objs.ResourceSlices {
		node := ptr.Deref(s.Spec.NodeName, "")
		if node == "" {
			continue
		}
		if shape[node] == nil {
			shape[node] = map[string]string{}
		}
		names := make([]string, 0, len(s.Spec.Devices))
		for _, dev := range s.Spec.Devices {
			names = append(names, dev.Name)
		}
		shape[node][s.Spec.Driver] += strings.Join(names, ",") + ";"
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		nodes := byGroup[g]
		sort.Strings(nodes)
		drivers := map[string]bool{}
		for _, n := range nodes {
			for drv := range shape[n] {
				drivers[drv] = true
			}
		}
		names := make([]string, 0, len(drivers))
		for drv := range drivers {
			names = append(names, drv)
		}
		sort.Strings(names)
		for _, drv := range names {
			variants := map[string][]string{}
			for _, n := range nodes {
				devs := sortedDevices(shape[n][drv])
				variants[devs] = append(variants[devs], n)
			}
			if len(variants) < 2 {
				continue
			}
			var parts []string
			objects := []Object{}
			for devs, ns := range variants {
				n := 0
				if devs != "" {
					n = len(strings.Split(devs, ","))
				}
				parts = append(parts, fmt.Sprintf("%s: %d devices", strings.Join(ns, ", "), n))
				for _, name := range ns {
					objects = append(objects, Object{Kind: "Node", Name: name})
				}
			}
			sort.Strings(parts)
			sort.Slice(objects, func(i, j int) bool { return objects[i].Name < objects[j].Name })
			d.add(Finding{Severity: Warning, Check: CheckGroupDevicesDiffer, Objects: objects,
				Message: fmt.Sprintf("node group %s: the nodes publish different devices of driver %s in spec.devices of their ResourceSlices (%s); a template copied from one of them is wrong for the others", g, drv, strings.Join(parts, "; ")),
				Advice:  "find why some nodes publish fewer or other devices (a broken GPU, a driver mid-upgrade, another machine type in the group) and fix those nodes, or split the group by machine type"})
		}
	}
}

// sortedDevices turns a node's "a,b;c;" device lists into one sorted list.
func sortedDevices(s string) string {
	var names []string
	for _, part := range strings.Split(s, ";") {
		for _, n := range strings.Split(part, ",") {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
