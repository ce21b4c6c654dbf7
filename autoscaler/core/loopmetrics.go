package core

import (
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/simulator/devicepools"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
	"draxr.dev/draxr/simulator/taints"
)

// recordStateMetrics publishes what the loop's cluster state says, with
// CA's metrics, and draxr's device counts.
func (a *Autoscaler) recordStateMetrics(st *clusterstate.State) {
	metrics.UpdateClusterSafeToAutoscale(st.Healthy)
	r := st.Readiness
	metrics.UpdateNodesCount(metrics.NodeCounts{Ready: r.Ready, Unready: r.Unready, NotStarted: r.NotStarted,
		Unregistered: r.Unregistered, LongUnregistered: r.LongUnregistered})
	metrics.UpdateUnschedulablePodsCount(len(st.Unschedulable), st.SchedulerUnprocessed)
	groups := a.cfg.Provider.NodeGroups()
	metrics.UpdateNodeGroupsCount(len(groups))
	maxNodes := 0
	states := make([]metrics.NodeGroupState, 0, len(groups))
	for _, g := range groups {
		maxNodes += g.MaxSize()
		target, _ := g.TargetSize()
		bs := a.clusterState.BackoffStatus(g.Id(), a.cfg.Now())
		healthy, ok := st.GroupHealthy[g.Id()]
		states = append(states, metrics.NodeGroupState{Name: g.Id(), Min: g.MinSize(), Max: g.MaxSize(), Target: target,
			Healthy: healthy || !ok, BackedOff: bs.BackedOff, BackoffReason: bs.Reason.Code})
	}
	if a.cfg.MaxNodesTotal > 0 {
		maxNodes = min(maxNodes, a.cfg.MaxNodesTotal)
	}
	metrics.UpdateMaxNodesCount(maxNodes)
	metrics.UpdateNodeGroups(states)
	l := a.cfg.Limits.Limits
	metrics.UpdateResourceLimits(l.Cores.Min, l.Cores.Max, l.Memory.Min, l.Memory.Max)

	if nodes, err := a.cfg.View.Nodes.List(labels.Everything()); err == nil {
		var cores, memory int64
		taints := map[string]int{}
		for _, n := range nodes {
			for _, t := range n.Spec.Taints {
				taints[taintType(t.Key, a.cfg.Taints)]++
			}
			if hasTaint(n, ToBeDeletedTaint) {
				continue // CA: minus deleting nodes
			}
			cores += n.Status.Capacity.Cpu().Value()
			memory += n.Status.Capacity.Memory().Value()
		}
		metrics.UpdateClusterResources(cores, memory)
		metrics.UpdateNodeTaintsCount(taints)
	}

	slices, err := a.cfg.View.Slices.List(labels.Everything())
	if err != nil {
		return
	}
	byNode := map[string][]*resourceapi.ResourceSlice{}
	for _, s := range slices {
		if s.Spec.NodeName != nil {
			byNode[*s.Spec.NodeName] = append(byNode[*s.Spec.NodeName], s)
		}
	}
	inUse, published := a.devices.counts(slices, st.Objects.ResourceClaims)
	metrics.UpdateDevices(inUse, published)
	metrics.UpdateDRATemplateMismatch(a.templateMismatch(st, byNode))
}

// deviceCountsMemo keeps the last loop's device counts with the objects
// they were counted from: a fleet's 20,000 claims took a tenth of a quiet
// loop to count again.
type deviceCountsMemo struct {
	slices    clusterstate.SameObjects[*resourceapi.ResourceSlice]
	claims    clusterstate.SameObjects[*resourceapi.ResourceClaim]
	inUse     map[string]float64
	published map[string]int
}

// counts is deviceCounts, the last loop's when slices and claims are the
// very objects it counted.
func (m *deviceCountsMemo) counts(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) (map[string]float64, map[string]int) {
	sameSlices := m.slices.Same(slices)
	if sameClaims := m.claims.Same(claims); !sameSlices || !sameClaims || m.inUse == nil {
		m.inUse, m.published = deviceCounts(slices, claims)
	}
	return m.inUse, m.published
}

// deviceCounts counts devices as hardware: in use per DeviceClass and
// published per driver. In a pool with shared counters the hardware is
// the counter set (NVIDIA's DynamicMIG publishes an H100 as the GPU and
// its MIG placements, all drawing on "gpu-N-counter-set"): it is one
// device published, and in use once however many of its partitions a
// class holds. Devices consuming no counters count one each. A device
// allocated several times (KEP-5075) is in use by the share of its
// capacity its allocations consume (four quarter shares: one device), as
// snapshot.ShareOfCapacity reads it; admin-access results use nothing.
func deviceCounts(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) (inUse map[string]float64, published map[string]int) {
	published = map[string]int{}
	type device struct{ driver, pool, name string }
	setsOf := map[device][]string{}
	devices := map[device]*resourceapi.Device{}
	for _, p := range devicepools.Pools(slices, snapshot.DeviceUsage{}) {
		published[p.Driver] += len(p.Sets)
		for _, d := range p.Devices {
			if ptr.Deref(d.AllowMultipleAllocations, false) {
				devices[device{p.Driver, p.Name, d.Name}] = d.Device // shared: its capacity is read
			}
			if len(d.ConsumesCounters) == 0 {
				published[p.Driver]++
				continue
			}
			for _, c := range d.ConsumesCounters {
				setsOf[device{p.Driver, p.Name, d.Name}] = append(setsOf[device{p.Driver, p.Name, d.Name}], c.CounterSet)
			}
		}
	}
	inUse = map[string]float64{}
	seen := map[[4]string]bool{}
	shared := map[[4]string]float64{} // class, device: its shares' use
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(res.AdminAccess, false) {
				continue
			}
			class := classLabel(scaleup.RequestClass(c, res.Request))
			dev := device{res.Driver, res.Pool, res.Device}
			if res.ShareID != nil {
				use := 1.0
				if d := devices[dev]; d != nil {
					id := structured.MakeDeviceID(res.Driver, res.Pool, res.Device)
					use = snapshot.ShareOfCapacity(d, structured.NewDeviceConsumedCapacity(id, res.ConsumedCapacity).ConsumedCapacity)
				}
				shared[[4]string{class, res.Driver, res.Pool, res.Device}] += use
				continue
			}
			sets := setsOf[dev]
			if len(sets) == 0 {
				inUse[class]++
				continue
			}
			for _, set := range sets {
				if k := [4]string{class, res.Driver, res.Pool, set}; !seen[k] {
					seen[k] = true
					inUse[class]++
				}
			}
		}
	}
	for k, use := range shared {
		inUse[k[0]] += min(use, 1)
	}
	return inUse, published
}

// templateMismatch compares the ResourceSlices of every Ready node of a
// group with those the group's template says it gets, as CA's
// dra_node_template_resources_mismatch does. A template's device groups
// are read once a loop; a node's are kept while its slices are the very
// objects they were read from (a fleet's nodes took a sixth of a loop).
func (a *Autoscaler) templateMismatch(st *clusterstate.State, byNode map[string][]*resourceapi.ResourceSlice) map[metrics.MismatchKey]int {
	groups := map[string]*nodegroup.NodeGroup{}
	for _, g := range st.Groups {
		groups[g.Name] = g
	}
	templates := map[string][]poolGroup{}
	kept := make(map[string]nodeDevices, len(st.GroupOf))
	out := map[metrics.MismatchKey]int{}
	for node, group := range st.GroupOf {
		g := groups[group]
		if g == nil || !st.Ready[node] {
			continue
		}
		tg, ok := templates[group]
		if !ok {
			_, tmpl := g.NewNode(node)
			tg = poolGroups(tmpl, nil)
			templates[group] = tg
		}
		nd := a.nodeDevices[node]
		if !nd.readFrom(byNode[node]) {
			nd = newNodeDevices(byNode[node])
		}
		kept[node] = nd
		for k, n := range compareGroups(withoutDrivers(tg, nd.flux), nd.groups) {
			out[k] += n
		}
	}
	a.nodeDevices = kept
	return out
}

// nodeDevices is a node's device groups as compareGroups takes them,
// with the slices they were read from.
type nodeDevices struct {
	slices []*resourceapi.ResourceSlice
	flux   map[string]bool
	groups []poolGroup
}

func newNodeDevices(slices []*resourceapi.ResourceSlice) nodeDevices {
	flux := driversInFlux(slices)
	return nodeDevices{slices: slices, flux: flux, groups: poolGroups(slices, flux)}
}

// readFrom says whether d was read from exactly these slices, each the
// same object at a resourceVersion (the informer replaces an object that
// changes; one without a version may have been changed in place). The
// informer lists them in no fixed order.
func (d nodeDevices) readFrom(read []*resourceapi.ResourceSlice) bool {
	if d.slices == nil || len(d.slices) != len(read) {
		return false
	}
	for _, s := range read {
		if s.ResourceVersion == "" || !slices.Contains(d.slices, s) {
			return false
		}
	}
	return true
}

// withoutDrivers drops the groups of the drivers in skip.
func withoutDrivers(groups []poolGroup, skip map[string]bool) []poolGroup {
	if len(skip) == 0 {
		return groups
	}
	var out []poolGroup
	for _, g := range groups {
		if !skip[g.driver] {
			out = append(out, g)
		}
	}
	return out
}

// poolGroup is the devices of one driver's pool that have the same
// attribute and capacity names.
type poolGroup struct {
	driver, pool string
	names        []string
	count        int
}

// compareSlices finds how a node's slices differ from its template's, by
// CA's rules: devices are grouped per driver, pool and set of attribute
// names; groups equal in names and count match; the rest pair up per
// driver by most names in common, then closest count (a "mismatch"); a
// template group left is "missing", a node group left "extra". Drivers
// with a pool still being published (slices missing, or generations
// mixed) are not compared.
func compareSlices(template, node []*resourceapi.ResourceSlice) map[metrics.MismatchKey]int {
	flux := driversInFlux(node)
	return compareGroups(poolGroups(template, flux), poolGroups(node, flux))
}

// compareGroups is compareSlices on the template's and the node's device
// groups, read without the drivers in flux.
func compareGroups(tg, ng []poolGroup) map[metrics.MismatchKey]int {
	out := map[metrics.MismatchKey]int{}
	// Exact matches.
	for i := 0; i < len(tg); i++ {
		for j := range ng {
			if tg[i].driver == ng[j].driver && tg[i].count == ng[j].count && equalNames(tg[i].names, ng[j].names) {
				tg, ng = removeAt(tg, i), removeAt(ng, j)
				i--
				break
			}
		}
	}
	// Closest matches.
	for _, t := range tg {
		best, bestOverlap, bestDelta := -1, -1, 0
		for j, n := range ng {
			if n.driver != t.driver {
				continue
			}
			overlap, delta := commonNames(t.names, n.names), abs(t.count-n.count)
			if overlap > bestOverlap || (overlap == bestOverlap && delta < bestDelta) {
				best, bestOverlap, bestDelta = j, overlap, delta
			}
		}
		if best < 0 {
			out[metrics.MismatchKey{Driver: t.driver, Type: metrics.MismatchMissing}]++
			continue
		}
		typ := metrics.MismatchMismatch
		if t.pool == "" && ng[best].pool == "" {
			typ = metrics.MismatchUnknown
		}
		out[metrics.MismatchKey{Driver: t.driver, Type: typ}]++
		ng = removeAt(ng, best)
	}
	for _, n := range ng {
		out[metrics.MismatchKey{Driver: n.driver, Type: metrics.MismatchExtra}]++
	}
	return out
}

func driversInFlux(slices []*resourceapi.ResourceSlice) map[string]bool {
	type pool struct{ driver, name string }
	type state struct {
		generation int64
		seen, want int64
		mixed      bool
	}
	pools := map[pool]*state{}
	for _, s := range slices {
		k := pool{s.Spec.Driver, s.Spec.Pool.Name}
		p := pools[k]
		if p == nil {
			p = &state{generation: s.Spec.Pool.Generation, want: s.Spec.Pool.ResourceSliceCount}
			pools[k] = p
		}
		p.seen++
		p.mixed = p.mixed || p.generation != s.Spec.Pool.Generation
	}
	out := map[string]bool{}
	for k, p := range pools {
		if p.mixed || p.seen != p.want {
			out[k.driver] = true
		}
	}
	return out
}

func poolGroups(slices []*resourceapi.ResourceSlice, skip map[string]bool) []poolGroup {
	idx := map[string]int{}
	var out []poolGroup
	for _, s := range slices {
		if skip[s.Spec.Driver] {
			continue
		}
		for _, d := range s.Spec.Devices {
			var names []string
			for n := range d.Attributes {
				names = append(names, string(n))
			}
			for n := range d.Capacity {
				names = append(names, "capacity:"+string(n))
			}
			sort.Strings(names)
			key := s.Spec.Driver + "\x00" + s.Spec.Pool.Name + "\x00" + strings.Join(names, ",")
			i, ok := idx[key]
			if !ok {
				i = len(out)
				idx[key] = i
				out = append(out, poolGroup{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, names: names})
			}
			out[i].count++
		}
	}
	return out
}

func equalNames(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func commonNames(a, b []string) int {
	in := map[string]bool{}
	for _, n := range a {
		in[n] = true
	}
	c := 0
	for _, n := range b {
		if in[n] {
			c++
		}
	}
	return c
}

func removeAt[T any](s []T, i int) []T { return append(s[:i:i], s[i+1:]...) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// taintType is CA's node_taints_count type of a taint key: the
// autoscaler's own taints and Kubernetes' well-known ones by key, the
// ignore-taint prefix as itself, startup and status taints (CA's
// prefixes and the flags') by kind, the rest "other".
func taintType(key string, tc taints.Config) string {
	switch {
	case strings.HasPrefix(key, taints.IgnoreTaintPrefix):
		return taints.IgnoreTaintPrefix
	case key == ToBeDeletedTaint || key == DeletionCandidateTaint:
		return key
	case strings.HasPrefix(key, "node.kubernetes.io/"), key == "node.cloudprovider.kubernetes.io/uninitialized",
		key == "node-role.kubernetes.io/control-plane":
		return key
	case tc.IsStartup(key):
		return "startup-taint"
	case tc.IsStatus(key):
		return "status-taint"
	}
	return metrics.TaintOther
}

// classLabel names devices whose request has no DeviceClass.
func classLabel(class string) string {
	if class == "" {
		return "unknown"
	}
	return class
}

// plannedDevices counts a scale-up's planned devices per DeviceClass.
func plannedDevices(su *scaleup.ScaleUp) map[string]int {
	out := map[string]int{}
	for _, p := range su.Placements {
		for _, c := range p.DeviceClasses {
			out[classLabel(c)]++
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// extendedResourcePods counts, per resource name, the pods that ask for
// an extended resource a DeviceClass maps (explicitly, or by its implicit
// deviceclass.resource.kubernetes.io/<class> name).
func extendedResourcePods(pods []*v1.Pod, classes []*resourceapi.DeviceClass) map[string]int {
	mapped := map[v1.ResourceName]bool{}
	for _, c := range classes {
		mapped[v1.ResourceName(resourceapi.ResourceDeviceClassPrefix+c.Name)] = true
		if c.Spec.ExtendedResourceName != nil {
			mapped[v1.ResourceName(*c.Spec.ExtendedResourceName)] = true
		}
	}
	out := map[string]int{}
	for _, p := range pods {
		asked := map[v1.ResourceName]bool{}
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				for _, rl := range []v1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
					for name := range rl {
						if mapped[name] {
							asked[name] = true
						}
					}
				}
			}
		}
		for name := range asked {
			out[string(name)]++
		}
	}
	return out
}

// removalReason is CA's scaled_down_nodes_total reason.
func removalReason(drain, unready bool) string {
	switch {
	case unready:
		return metrics.ScaleDownUnready
	case drain:
		return metrics.ScaleDownUnderutilized
	}
	return metrics.ScaleDownEmpty
}
