package placement

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// nodeStates names the state of nodes that a pod's Filter verdict and
// scores read, for pods of the kind StateCopies and SharedVerdicts take:
// two nodes in the same state reject such a pod alike, score it alike
// and, placed there, give it the same devices but for their names. The
// state is the node's shape as EmptyNodeSignature hashes it (labels,
// taints, unschedulable, allocatable, declared features, its slices, the
// node's name taken out), the requests (as Filter and as scoring count
// them) and count of its pods, and which devices of its own pool are
// allocated. It holds while nodes and slices do not change but for nodes
// removed, and only where statesExact.
type nodeStates struct {
	eng *Engine
	// class is each node's shape class (nil: none).
	class   map[string]*nodeClass
	classes []*nodeClass
	// ids are a node's devices, slice by slice, for the allocated set.
	ids map[string][]structured.DeviceID
	// keys are the states last computed, each with the generation of
	// the node it was computed for: a node changes generation with every
	// pod added or removed, and its devices are allocated only to its
	// pods (every slice is the node's own pool).
	keys map[string]keyAt
	// withImages puts the node's images in its shape, for ImageLocality's
	// scores.
	withImages bool
	buf        []byte
}

type keyAt struct {
	generation int64
	key        string
}

func newNodeStates(eng *Engine, withImages bool) *nodeStates {
	return &nodeStates{eng: eng, class: map[string]*nodeClass{}, ids: map[string][]structured.DeviceID{},
		keys: map[string]keyAt{}, withImages: withImages}
}

// statesExact reports whether the profile and snapshot let nodeStates
// name what Filter reads: only in-tree Filter plugins that read nothing
// else of the node for an eligible pod, no hard default spreading, no
// node affinity the profile adds (it may name a label whose value is
// the node's name), and every slice local to one node.
func (eng *Engine) statesExact() bool {
	plugins := eng.fw.ListPlugins()
	for _, set := range [][]string{pluginNames(plugins.Filter.Enabled), pluginNames(plugins.PreFilter.Enabled), pluginNames(plugins.Reserve.Enabled)} {
		for _, p := range set {
			if !copyFilter(p) {
				return false
			}
		}
	}
	return !eng.SpreadsByDefault() && !eng.AddsNodeAffinity() && len(eng.snap.SlicesForNode("")) == 0
}

// noInterPodTerms reports whether no placed pod has inter-pod
// (anti-)affinity, which would make a node's verdict read its domain.
func (eng *Engine) noInterPodTerms() bool {
	lister := eng.snap.NodeInfos()
	if l, err := lister.HavePodsWithAffinityList(); err != nil || len(l) > 0 {
		return false
	}
	l, err := lister.HavePodsWithRequiredAntiAffinityList()
	return err == nil && len(l) == 0
}

// Key says the node's state, "" when it has none a copy could use.
func (s *nodeStates) Key(node string) string {
	ni := s.eng.snap.NodeInfo(node)
	if ni == nil || ni.Node() == nil {
		return ""
	}
	gen := ni.GetGeneration()
	if k, ok := s.keys[node]; ok && k.generation == gen && !s.eng.verify {
		return k.key
	}
	key := s.computeKey(node)
	if k, ok := s.keys[node]; ok && k.generation == gen && k.key != key {
		ShortcutDiffers("node states", "node %s kept state %q at generation %d, which is now %q", node, k.key, gen, key)
	}
	s.keys[node] = keyAt{generation: gen, key: key}
	return key
}

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

// computeKey says the node's state as it is now (see nodeStates), ""
// when it has none.
func (s *nodeStates) computeKey(node string) string {
	ni := s.eng.snap.NodeInfo(node)
	if ni == nil || ni.Node() == nil {
		return ""
	}
	cl := s.classOf(node)
	if cl == nil {
		return ""
	}
	usage := s.eng.snap.DeviceUsage()
	b := strconv.AppendInt(s.buf[:0], int64(cl.id), 10)
	r := ni.Requested
	nz := ni.NonZeroRequested
	for _, n := range []int64{int64(len(ni.Pods)), r.MilliCPU, r.Memory, r.EphemeralStorage, nz.MilliCPU, nz.Memory} {
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
	for i, id := range s.ids[node] {
		if usage.Shares(id) > 0 {
			return "" // shares and consumed capacity are not keyed
		}
		if usage.Whole(id) {
			b = strconv.AppendInt(append(b, ','), int64(i), 10)
		}
	}
	s.buf = b
	return string(b)
}

// classOf finds the node's shape class, comparing it with each class's
// first node; nil when its slices are not its own pool or there are too
// many classes.
func (s *nodeStates) classOf(node string) *nodeClass {
	if cl, ok := s.class[node]; ok {
		return cl
	}
	s.class[node] = nil
	var ids []structured.DeviceID
	for _, sl := range s.eng.snap.SlicesForNode(node) {
		if sl.Spec.Pool.Name != node || ptr.Deref(sl.Spec.NodeName, "") != node {
			return nil
		}
		for i := range sl.Spec.Devices {
			ids = append(ids, structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, sl.Spec.Devices[i].Name))
		}
	}
	s.ids[node] = ids
	for _, cl := range s.classes {
		if keys, ok := s.sameShape(cl.rep, node); ok && slices.Equal(keys, cl.nameKeys) {
			s.class[node] = cl
			return cl
		}
	}
	if len(s.classes) >= maxClasses {
		return nil
	}
	keys, _ := s.sameShape(node, node)
	cl := &nodeClass{id: len(s.classes), rep: node, nameKeys: keys}
	s.classes = append(s.classes, cl)
	s.class[node] = cl
	return cl
}

// sameShape compares what Filter plugins (and, withImages, Score
// plugins) read of two nodes, each one's name taken out, and returns the
// label keys whose value is the name.
func (s *nodeStates) sameShape(a, b string) ([]string, bool) {
	na, nb := s.eng.snap.NodeInfo(a).Node(), s.eng.snap.NodeInfo(b).Node()
	if len(na.Labels) != len(nb.Labels) || na.Spec.Unschedulable != nb.Spec.Unschedulable ||
		!slices.Equal(na.Status.DeclaredFeatures, nb.Status.DeclaredFeatures) ||
		!apiequality.Semantic.DeepEqual(na.Status.Allocatable, nb.Status.Allocatable) ||
		!apiequality.Semantic.DeepEqual(na.Spec.Taints, nb.Spec.Taints) ||
		s.withImages && !apiequality.Semantic.DeepEqual(na.Status.Images, nb.Status.Images) {
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
	sa, sb := s.eng.snap.SlicesForNode(a), s.eng.snap.SlicesForNode(b)
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
