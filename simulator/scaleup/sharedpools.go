package scaleup

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// exhaustedSharedPools names the shared (network-attached: allNodes or
// nodeSelector) pools whose devices the pod could use and that have none
// free: no new node adds devices to such a pool, so they explain why a
// pod that asks for them waits whatever the autoscaler does.
func (st *state) exhaustedSharedPools(pod *v1.Pod) []string {
	snap := st.p.Engine.Snapshot()
	classes := st.classesOf(pod)
	if len(classes) == 0 {
		return nil
	}
	type pool struct{ driver, name string }
	total, free := map[pool]int{}, map[pool]int{}
	usage := snap.DeviceUsage()
	for _, s := range snap.AllResourceSlices() {
		if !ptr.Deref(s.Spec.AllNodes, false) && s.Spec.NodeSelector == nil {
			continue
		}
		key := pool{s.Spec.Driver, s.Spec.Pool.Name}
		for i := range s.Spec.Devices {
			dev := &s.Spec.Devices[i]
			if !st.matchesAny(classes, s.Spec.Driver, dev) {
				continue
			}
			total[key]++
			// A device allocated several times with capacity left takes
			// another share.
			if use, _ := usage.Of(s.Spec.Driver, s.Spec.Pool.Name, dev); use < 1 {
				free[key]++
			}
		}
	}
	var out []string
	for key, n := range total {
		if free[key] == 0 {
			out = append(out, fmt.Sprintf("shared pool %s of driver %s has no free device (all %d it could use are allocated)", key.name, key.driver, n))
		}
	}
	sort.Strings(out)
	return out
}

func (st *state) matchesAny(classes []*resourceapi.DeviceClass, driver string, dev *resourceapi.Device) bool {
	for _, c := range classes {
		if ok, err := st.p.Matcher.Matches(c, driver, dev); err == nil && ok {
			return true
		}
	}
	return false
}

// classesOf lists the DeviceClasses the pod asks for: through extended
// resources and through its claims' requests.
func (st *state) classesOf(pod *v1.Pod) []*resourceapi.DeviceClass {
	snap := st.p.Engine.Snapshot()
	idx := snap.Classes()
	seen := map[string]bool{}
	var out []*resourceapi.DeviceClass
	add := func(c *resourceapi.DeviceClass) {
		if c != nil && !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	addRequests := func(spec *resourceapi.ResourceClaimSpec) {
		for _, r := range spec.Devices.Requests {
			names := []string{}
			if r.Exactly != nil {
				names = append(names, r.Exactly.DeviceClassName)
			}
			for _, sub := range r.FirstAvailable {
				names = append(names, sub.DeviceClassName)
			}
			for _, n := range names {
				if c, err := idx.Get(n); err == nil {
					add(c)
				}
			}
		}
	}
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for name := range c.Resources.Requests {
			add(idx.GetDeviceClass(name))
		}
	}
	for _, pc := range pod.Spec.ResourceClaims {
		switch {
		case pc.ResourceClaimName != nil:
			if c := snap.ResourceClaim(pod.Namespace, *pc.ResourceClaimName); c != nil {
				addRequests(&c.Spec)
			}
		case pc.ResourceClaimTemplateName != nil:
			if t := snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName); t != nil {
				addRequests(&t.Spec.Spec)
			}
		}
	}
	return out
}
