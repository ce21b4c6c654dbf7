package snapshot

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cycleScope narrows what the DRA listers return while one pod is being
// scheduled, so a placement costs what the pod and its candidate nodes
// need instead of a walk over every claim and slice in the cluster.
//
// It is exact for the v1.37 DynamicResources plugin:
//   - ResourceClaimTracker.List is read only to find the pod's own
//     extended-resource claim (annotation plus controller reference), so
//     the scoped list holds that claim, if any. Devices held by all other
//     claims still reach the allocator through GatherAllocatedState.
//   - ResourceSlices are read to build an allocator that is then asked
//     about candidate nodes only, so the scoped list holds the slices local
//     to those nodes plus every slice not local to one node. In Score,
//     NodeResourcesFit counts each scored node's devices from the slices
//     that name or select it: the scope is the nodes scored.
type cycleScope struct {
	pod   types.UID
	nodes []string // nil: all slices
	buf   []*resourceapi.ResourceSlice
	one   [1]*resourceapi.ResourceClaim
	seen  map[string]struct{}
}

// SetCycleScope limits the DRA listers to one pod and its candidate nodes
// until ClearCycleScope. nodes == nil keeps all slices visible.
func (s *Snapshot) SetCycleScope(pod types.UID, nodes []string) {
	if s.unscoped {
		return
	}
	s.scopeStore.pod, s.scopeStore.nodes = pod, nodes
	s.scope = &s.scopeStore
}

// ClearCycleScope makes the listers return everything again.
func (s *Snapshot) ClearCycleScope() { s.scope = nil }

func (sc *cycleScope) claims(s *Snapshot) []*resourceapi.ResourceClaim {
	if c := s.xrClaims[sc.pod]; c != nil {
		sc.one[0] = c
		return sc.one[:]
	}
	return nil
}

func (sc *cycleScope) slices(s *Snapshot) []*resourceapi.ResourceSlice {
	sc.buf = append(sc.buf[:0], s.slicesByNode[""]...)
	if len(sc.nodes) == 1 {
		sc.buf = append(sc.buf, s.slicesByNode[sc.nodes[0]]...)
		return sc.buf
	}
	// A node named twice must not list its slices twice: the allocator
	// would see more slices than the pool's resourceSliceCount and
	// allocate nothing from it.
	if sc.seen == nil {
		sc.seen = map[string]struct{}{}
	}
	clear(sc.seen)
	for _, n := range sc.nodes {
		if _, dup := sc.seen[n]; dup {
			continue
		}
		sc.seen[n] = struct{}{}
		sc.buf = append(sc.buf, s.slicesByNode[n]...)
	}
	return sc.buf
}
