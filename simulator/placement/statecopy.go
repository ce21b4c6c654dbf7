package placement

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/ptr"
)

// StateCopies copies placements between nodes in the same state: a pod of
// a kind that was placed on a node in some state goes, onto another node
// in that state, where it went there, with the devices renamed (as
// Replicate does for empty nodes). A node's state is what the Filter
// plugins read of it for such a pod: its shape as EmptyNodeSignature
// hashes it (labels, taints, unschedulable, allocatable, declared
// features, its slices, the node's name taken out), the requests and
// count of its pods, and which devices of its own pool are allocated.
//
// It is for one run in which nodes and slices do not change but for nodes
// removed (a scale-down search). It is exact under preconditions checked
// here: the profile runs only in-tree Filter plugins whose verdict for
// such a pod reads nothing else; every slice is local to one node and is
// its pool; no placed pod has inter-pod (anti-)affinity and the profile
// adds no hard default spread constraints; the pod is Replicable, has no
// pod-level resources, host ports, extended resources, scheduling group,
// volumes but local ones, and selects no node by a label whose value is
// the node's name; its claims are its own and fresh; the copied
// allocation holds only devices of the node's own pool, whole. The
// caller keys pods by kind (estimator.Kinds), as Replicate's callers do.
type StateCopies struct {
	eng *Engine
	// class is each node's shape class (nil: none).
	class   map[string]*nodeClass
	classes []*nodeClass
	// ids are a node's devices, slice by slice, for the allocated set.
	ids    map[string][]structured.DeviceID
	memo   map[string]map[string]*placedCopy // kind -> state -> copy
	buf    []byte
	copied int
}

// Copied counts the placements copied.
func (c *StateCopies) Copied() int { return c.copied }

// nodeClass is nodes of one shape; rep is the first seen, nameKeys the
// labels whose value is the node's own name.
type nodeClass struct {
	id       int
	rep      string
	nameKeys []string
}

// maxClasses bounds the shapes compared per node: a fleet of all
// different nodes copies nothing and should not pay for it.
const maxClasses = 16

// placedCopy is what placing a pod wrote of its claims on node.
type placedCopy struct {
	node   string
	allocs []*resourceapi.AllocationResult // by spec.resourceClaims index
}

// copyFilter says whether a PreFilter, Filter or Reserve plugin's verdict
// for an eligible pod reads only the node's state as StateCopies keys it,
// and whether placeCopy writes its Reserve as commit does.
func copyFilter(plugin string) bool {
	switch plugin {
	case names.NodeName, names.NodeUnschedulable, names.TaintToleration, names.NodeAffinity,
		names.NodePorts, names.NodeResourcesFit, names.VolumeRestrictions, names.NodeVolumeLimits,
		names.VolumeBinding, names.VolumeZone, names.PodTopologySpread, names.InterPodAffinity,
		names.DynamicResources, names.NodeDeclaredFeatures,
		"DraxrDynamicResources", "DraxrNodeResourcesFit":
		return true
	}
	return false
}

// NewStateCopies returns the copier for the snapshot as it is, or nil when
// copies could not be exact (see StateCopies).
func (eng *Engine) NewStateCopies() *StateCopies {
	plugins := eng.fw.ListPlugins()
	for _, set := range [][]string{pluginNames(plugins.Filter.Enabled), pluginNames(plugins.PreFilter.Enabled), pluginNames(plugins.Reserve.Enabled)} {
		for _, p := range set {
			if !copyFilter(p) {
				return nil
			}
		}
	}
	if eng.SpreadsByDefault() || len(eng.snap.SlicesForNode("")) > 0 {
		return nil
	}
	lister := eng.snap.NodeInfos()
	if l, err := lister.HavePodsWithAffinityList(); err != nil || len(l) > 0 {
		return nil
	}
	if l, err := lister.HavePodsWithRequiredAntiAffinityList(); err != nil || len(l) > 0 {
		return nil
	}
	return &StateCopies{eng: eng, class: map[string]*nodeClass{}, ids: map[string][]structured.DeviceID{},
		memo: map[string]map[string]*placedCopy{}}
}

// Eligible reports whether the pod's placements may be copied (see
// StateCopies); ownNamed as for Replicable. Any resource outside the
// kubernetes.io domain counts as extended.
func Eligible(pod *v1.Pod, ownNamed bool) bool {
	if !Replicable(pod, ownNamed) || pod.Spec.Resources != nil || pod.Spec.SchedulingGroup != nil || pod.Spec.NodeName != "" {
		return false
	}
	for name := range pod.Spec.Overhead {
		if !v1helper.IsNativeResource(name) {
			return false
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, p := range cs[i].Ports {
				if p.HostPort != 0 {
					return false
				}
			}
			for _, rl := range []v1.ResourceList{cs[i].Resources.Requests, cs[i].Resources.Limits} {
				for name := range rl {
					if !v1helper.IsNativeResource(name) {
						return false
					}
				}
			}
		}
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i].VolumeSource
		if v.EmptyDir == nil && v.ConfigMap == nil && v.Secret == nil && v.Projected == nil && v.DownwardAPI == nil {
			return false
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if len(t.MatchFields) > 0 {
				return false
			}
		}
	}
	return true
}

// Key says the node's state, "" when it has none a copy could use.
func (c *StateCopies) Key(node string) string {
	ni := c.eng.snap.NodeInfo(node)
	if ni == nil || ni.Node() == nil {
		return ""
	}
	cl := c.classOf(node)
	if cl == nil {
		return ""
	}
	usage := c.eng.snap.DeviceUsage()
	b := strconv.AppendInt(c.buf[:0], int64(cl.id), 10)
	r := ni.Requested
	for _, n := range []int64{int64(len(ni.Pods)), r.MilliCPU, r.Memory, r.EphemeralStorage} {
		b = strconv.AppendInt(append(b, '|'), n, 10)
	}
	if len(r.ScalarResources) > 0 {
		scalars := make([]string, 0, len(r.ScalarResources))
		for name := range r.ScalarResources {
			scalars = append(scalars, string(name))
		}
		slices.Sort(scalars)
		for _, name := range scalars {
			b = strconv.AppendInt(append(append(b, '|'), name...), r.ScalarResources[v1.ResourceName(name)], 10)
		}
	}
	b = append(b, "|d"...)
	for i, id := range c.ids[node] {
		if usage.Shares(id) > 0 {
			return "" // shares and consumed capacity are not keyed
		}
		if usage.Whole(id) {
			b = strconv.AppendInt(append(b, ','), int64(i), 10)
		}
	}
	c.buf = b
	return string(b)
}

// classOf finds the node's shape class, comparing it with each class's
// first node; nil when its slices are not its own pool or there are too
// many classes.
func (c *StateCopies) classOf(node string) *nodeClass {
	if cl, ok := c.class[node]; ok {
		return cl
	}
	c.class[node] = nil
	var ids []structured.DeviceID
	for _, s := range c.eng.snap.SlicesForNode(node) {
		if s.Spec.Pool.Name != node || ptr.Deref(s.Spec.NodeName, "") != node {
			return nil
		}
		for i := range s.Spec.Devices {
			ids = append(ids, structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, s.Spec.Devices[i].Name))
		}
	}
	c.ids[node] = ids
	for _, cl := range c.classes {
		if keys, ok := c.sameShape(cl.rep, node); ok && slices.Equal(keys, cl.nameKeys) {
			c.class[node] = cl
			return cl
		}
	}
	if len(c.classes) >= maxClasses {
		return nil
	}
	keys, _ := c.sameShape(node, node)
	cl := &nodeClass{id: len(c.classes), rep: node, nameKeys: keys}
	c.classes = append(c.classes, cl)
	c.class[node] = cl
	return cl
}

// sameShape compares what Filter plugins read of two nodes, each one's
// name taken out, and returns the label keys whose value is the name.
func (c *StateCopies) sameShape(a, b string) ([]string, bool) {
	na, nb := c.eng.snap.NodeInfo(a).Node(), c.eng.snap.NodeInfo(b).Node()
	if len(na.Labels) != len(nb.Labels) || na.Spec.Unschedulable != nb.Spec.Unschedulable ||
		!slices.Equal(na.Status.DeclaredFeatures, nb.Status.DeclaredFeatures) ||
		!sameQuantities(na.Status.Allocatable, nb.Status.Allocatable) ||
		!apiequality.Semantic.DeepEqual(na.Spec.Taints, nb.Spec.Taints) {
		return nil, false
	}
	var keys []string
	for k, va := range na.Labels {
		vb, ok := nb.Labels[k]
		switch {
		case !ok:
			return nil, false
		case va == a && vb == b:
			keys = append(keys, k)
		case va != vb:
			return nil, false
		}
	}
	slices.Sort(keys)
	sa, sb := c.eng.snap.SlicesForNode(a), c.eng.snap.SlicesForNode(b)
	if len(sa) != len(sb) {
		return nil, false
	}
	for i := range sa {
		if !sameSlice(sa[i].Spec, sb[i].Spec) {
			return nil, false
		}
	}
	return keys, true
}

// sameSlice compares two slices' specs but for their node and pool names.
// Devices' attributes and capacities, most of a slice, are compared
// directly, the rest by reflection: comparing a 10-device slice wholly by
// reflection costs as much as a few scheduling cycles.
func sameSlice(x, y resourceapi.ResourceSliceSpec) bool {
	if len(x.Devices) != len(y.Devices) {
		return false
	}
	for i := range x.Devices {
		if !sameDevice(x.Devices[i], y.Devices[i]) {
			return false
		}
	}
	x.NodeName, y.NodeName, x.Pool.Name, y.Pool.Name, x.Devices, y.Devices = nil, nil, "", "", nil, nil
	return apiequality.Semantic.DeepEqual(x, y)
}

func sameDevice(a, b resourceapi.Device) bool {
	if len(a.Attributes) != len(b.Attributes) || len(a.Capacity) != len(b.Capacity) {
		return false
	}
	for name, x := range a.Attributes {
		y, ok := b.Attributes[name]
		if !ok || !samePtr(x.IntValue, y.IntValue) || !samePtr(x.BoolValue, y.BoolValue) ||
			!samePtr(x.StringValue, y.StringValue) || !samePtr(x.VersionValue, y.VersionValue) {
			return false
		}
		x.IntValue, x.BoolValue, x.StringValue, x.VersionValue = nil, nil, nil, nil
		y.IntValue, y.BoolValue, y.StringValue, y.VersionValue = nil, nil, nil, nil
		// List values, rare, by reflection. TestSameSliceKnowsEveryField
		// fails when the API adds a field.
		if x.IntValues != nil || y.IntValues != nil || x.BoolValues != nil || y.BoolValues != nil ||
			x.StringValues != nil || y.StringValues != nil || x.VersionValues != nil || y.VersionValues != nil {
			if !apiequality.Semantic.DeepEqual(x, y) {
				return false
			}
		}
	}
	for name, x := range a.Capacity {
		y, ok := b.Capacity[name]
		if !ok || x.Value.Cmp(y.Value) != 0 || (x.RequestPolicy != nil || y.RequestPolicy != nil) &&
			!apiequality.Semantic.DeepEqual(x.RequestPolicy, y.RequestPolicy) {
			return false
		}
	}
	a.Attributes, b.Attributes, a.Capacity, b.Capacity = nil, nil, nil, nil
	return apiequality.Semantic.DeepEqual(a, b)
}

func samePtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func sameQuantities(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		if qb, ok := b[name]; !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// selectsByName reports whether the pod selects nodes by a label whose
// value is the node's name in its class.
func selectsByName(pod *v1.Pod, cl *nodeClass) bool {
	if len(cl.nameKeys) == 0 {
		return false
	}
	for k := range pod.Spec.NodeSelector {
		if slices.Contains(cl.nameKeys, k) {
			return true
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				if slices.Contains(cl.nameKeys, r.Key) {
					return true
				}
			}
		}
	}
	return false
}

// Place copies onto node the placement a pod of the kind got on a node in
// the state key (Key, read before any change), if one was learned; it
// returns the placed pod, or nil and changes nothing. The pod must be
// Eligible and pending.
func (c *StateCopies) Place(pod *v1.Pod, kind, key, node string) *v1.Pod {
	if key == "" || selectsByName(pod, c.class[node]) {
		return nil
	}
	src := c.memo[kind][key]
	if src == nil || len(src.allocs) != len(pod.Spec.ResourceClaims) {
		return nil
	}
	var want []string
	fits := false
	if c.eng.verify {
		want, fits = c.eng.verifyStateCopy(pod, node)
	}
	c.eng.snap.Fork()
	placed := c.eng.placeCopy(pod, src, node)
	if placed == nil {
		c.eng.snap.Revert()
		return nil // the full path runs instead
	}
	c.eng.snap.Commit()
	c.copied++
	if c.eng.verify {
		if !fits {
			ShortcutDiffers("state copy", "pod %s was copied onto node %s, which the scheduler's plugins reject", podKey(pod), node)
		}
		if got := c.eng.devicesOf(placed); !slices.Equal(got, want) {
			ShortcutDiffers("state copy", "pod %s was copied onto node %s with devices %v, the scheduler's plugins give it %v", podKey(pod), node, got, want)
		}
	}
	return placed
}

// Learn records where the scheduler's plugins placed a pod of the kind on
// node, whose state before was key, for Place to copy.
func (c *StateCopies) Learn(pod *v1.Pod, kind, key, node string) {
	if key == "" || selectsByName(pod, c.class[node]) {
		return
	}
	src := &placedCopy{node: node}
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			return
		}
		claim := c.eng.snap.ResourceClaim(pod.Namespace, *name)
		if claim == nil || claim.Status.Allocation == nil {
			return
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Pool != node || r.ShareID != nil {
				return
			}
		}
		src.allocs = append(src.allocs, claim.Status.Allocation)
	}
	if c.eng.findExtendedResourceClaim(pod) != nil {
		return
	}
	if c.memo[kind] == nil {
		c.memo[kind] = map[string]*placedCopy{}
	}
	c.memo[kind][key] = src
}

// placeCopy writes what committing the pod on node would: each claim,
// fresh, gets the source's allocation moved to the node, the finalizer
// the DynamicResources plugin's Reserve adds, and the pod's reservation.
func (eng *Engine) placeCopy(pod *v1.Pod, src *placedCopy, node string) *v1.Pod {
	copied := *pod
	placed := &copied
	placed.Spec.NodeName = node
	placed.Status.ExtendedResourceClaimStatus = nil
	for i := range placed.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(placed, &placed.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			return nil
		}
		stored := eng.snap.ResourceClaim(placed.Namespace, *name)
		if stored == nil || stored.Status.Allocation != nil || len(stored.Status.ReservedFor) > 0 || stored.DeletionTimestamp != nil {
			return nil
		}
		alloc, err := moveAllocation(src.allocs[i], src.node, node, [2]string{placed.Namespace, *name})
		if err != nil {
			return nil
		}
		claim := statusCopy(stored)
		claim.Status.Allocation = alloc
		if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
			claim.Finalizers = append(slices.Clip(claim.Finalizers), resourceapi.Finalizer)
		}
		reserveFor(claim, placed)
		eng.snap.SetResourceClaim(claim)
	}
	if err := eng.snap.AddPod(placed); err != nil {
		return nil
	}
	return placed
}

// verifyStateCopy places the pod on node through the scheduler's plugins
// on a fork, undone, and returns its devices and whether it fits.
func (eng *Engine) verifyStateCopy(pod *v1.Pod, node string) ([]string, bool) {
	eng.snap.Fork()
	defer eng.snap.Revert()
	placed, ferr := eng.Place(pod, node)
	if ferr != nil {
		return nil, false
	}
	return eng.devicesOf(placed), true
}

func pluginNames(ps []config.Plugin) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
