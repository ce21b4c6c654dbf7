package placement

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"sort"
	"strconv"

	"k8s.io/dynamic-resource-allocation/structured"
)

// EmptyNodeSignature hashes what the scheduler's Filter plugins read of a
// node that holds no pod and no allocated device: labels, taints,
// unschedulable, allocatable and capacity, declared features, and its
// ResourceSlices, with the node's name (in label values, slice node names
// and pool names) taken out. Two nodes with one signature take the same
// pods the same way, so Replicate may copy one's placements onto the
// other. ok is false when the node is not empty, has slices that are not
// its own pool, or is unknown.
func (eng *Engine) EmptyNodeSignature(name string) (sig uint64, ok bool) {
	ni := eng.snap.NodeInfo(name)
	if ni == nil || len(ni.Pods) > 0 || ni.Node() == nil {
		return 0, false
	}
	node := ni.Node()
	usage := eng.snap.DeviceUsage()
	var slices []string
	for _, s := range eng.snap.SlicesForNode(name) {
		if s.Spec.Pool.Name != name {
			return 0, false
		}
		for _, d := range s.Spec.Devices {
			id := structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)
			if usage.Whole(id) || usage.Shares(id) > 0 {
				return 0, false
			}
		}
		b, err := json.Marshal(s.Spec)
		if err != nil {
			return 0, false
		}
		slices = append(slices, string(b))
	}
	sort.Strings(slices)
	b, err := json.Marshal([]any{node.Labels, node.Spec.Taints, node.Spec.Unschedulable,
		node.Status.Allocatable, node.Status.Capacity, node.Status.DeclaredFeatures, slices})
	if err != nil {
		return 0, false
	}
	// The name appears as a whole JSON string (a label value, a slice's
	// node or pool) or inside the slices' quoted JSON.
	b = bytes.ReplaceAll(b, []byte(strconv.Quote(name)), []byte(`"\u0000"`))
	b = bytes.ReplaceAll(b, []byte(`\"`+name+`\"`), []byte(`\"\u0000\"`))
	f := fnv.New64a()
	_, _ = f.Write(b)
	return f.Sum64(), true
}
