package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"draxr.dev/draxr/scheduler/devicefull"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// ResourceClaims implements fwk.SharedDRAManager.
func (s *Snapshot) ResourceClaims() fwk.ResourceClaimTracker { return claimTracker{s} }

// ResourceSlices implements fwk.SharedDRAManager.
func (s *Snapshot) ResourceSlices() fwk.ResourceSliceLister { return sliceLister{s} }

// DeviceClasses implements fwk.SharedDRAManager.
func (s *Snapshot) DeviceClasses() fwk.DeviceClassLister { return s.classes }

// DeviceClassResolver implements fwk.SharedDRAManager.
func (s *Snapshot) DeviceClassResolver() fwk.DeviceClassResolver { return s.classes }

// PodGroups implements fwk.SharedDRAManager: with DRAWorkloadResourceClaims
// the DynamicResources plugin reads a pod's PodGroup to tell the claims it
// shares with its group from its own.
func (s *Snapshot) PodGroups() fwk.PodGroupLister { return podGroupLister{s} }

// SetPodGroups gives the snapshot the cluster's PodGroups, which do not
// change during a simulation.
func (s *Snapshot) SetPodGroups(groups []*schedulingapi.PodGroup) {
	clear(s.podGroups)
	for _, pg := range groups {
		s.podGroups[pg.Namespace+"/"+pg.Name] = pg
	}
}

// PodGroup returns a PodGroup, nil when absent.
func (s *Snapshot) PodGroup(namespace, name string) *schedulingapi.PodGroup {
	return s.podGroups[namespace+"/"+name]
}

// AddResourceSlice adds a ResourceSlice; names must be unique.
func (s *Snapshot) AddResourceSlice(slice *resourceapi.ResourceSlice) error {
	if _, ok := s.slices[slice.Name]; ok {
		return fmt.Errorf("ResourceSlice %s already exists in the snapshot", slice.Name)
	}
	slice = s.withTaintRules(slice)
	node := ptr.Deref(slice.Spec.NodeName, "")
	s.slices[slice.Name] = slice
	s.slicesByNode[node] = append(s.slicesByNode[node], slice)
	s.sliceList = nil
	if s.forking() {
		s.onUndo(func() { s.dropSlice(slice) })
	}
	return nil
}

// RemoveResourceSlice removes a ResourceSlice by name.
func (s *Snapshot) RemoveResourceSlice(name string) {
	slice, ok := s.slices[name]
	if !ok {
		return
	}
	s.dropSlice(slice)
	s.onUndo(func() {
		node := ptr.Deref(slice.Spec.NodeName, "")
		s.slices[slice.Name] = slice
		s.slicesByNode[node] = append(s.slicesByNode[node], slice)
		s.sliceList = nil
	})
}

func (s *Snapshot) dropSlice(slice *resourceapi.ResourceSlice) {
	node := ptr.Deref(slice.Spec.NodeName, "")
	delete(s.slices, slice.Name)
	delete(s.sliceDevices, slice)
	onNode := s.slicesByNode[node]
	if i := slices.Index(onNode, slice); i >= 0 {
		s.slicesByNode[node] = slices.Delete(onNode, i, i+1)
	}
	if len(s.slicesByNode[node]) == 0 {
		delete(s.slicesByNode, node)
	}
	s.sliceList = nil
}

// SlicesForNode returns the slices local to one node (spec.nodeName).
func (s *Snapshot) SlicesForNode(nodeName string) []*resourceapi.ResourceSlice {
	return s.slicesByNode[nodeName]
}

// HasFreeDevice reports whether a slice local to the node has a device
// not allocated, or one that may be allocated several times. Tainted and
// counter-bound devices count as free: false means plainly full. The
// planner asks it for every pending pod on every node, so each slice's
// devices are read once (a slice is never changed, only replaced).
func (s *Snapshot) HasFreeDevice(nodeName string) bool {
	for _, slice := range s.slicesByNode[nodeName] {
		d, ok := s.sliceDevices[slice]
		if !ok {
			d = devicefull.NewSlice(slice)
			s.sliceDevices[slice] = d
		}
		if d.HasFree(s.allocated.ids) {
			return true
		}
	}
	return false
}

// AllResourceSlices returns every slice, sorted by name.
func (s *Snapshot) AllResourceSlices() []*resourceapi.ResourceSlice {
	if s.sliceList == nil {
		s.sliceList = make([]*resourceapi.ResourceSlice, 0, len(s.slices))
		for _, slice := range s.slices {
			s.sliceList = append(s.sliceList, slice)
		}
		sort.Slice(s.sliceList, func(i, j int) bool { return s.sliceList[i].Name < s.sliceList[j].Name })
	}
	return s.sliceList
}

// SetResourceClaim adds or replaces a claim (by namespace/name) and keeps
// the allocated-device index in step. The claim is stored as given.
func (s *Snapshot) SetResourceClaim(claim *resourceapi.ResourceClaim) {
	s.setResourceClaim(claim, nil)
}

// setResourceClaim is SetResourceClaim with what is known of the claim
// (nil: computed here).
func (s *Snapshot) setResourceClaim(claim *resourceapi.ResourceClaim, facts *claimFacts) {
	key := claimKey{claim.Namespace, claim.Name}
	previous := s.claims[key]
	s.replaceClaim(key, previous, claim, facts)
	if s.forking() { // no closure made for a build's thousands of claims
		s.onUndo(func() { s.replaceClaim(key, claim, previous, nil) })
	}
}

// DeleteResourceClaim removes a claim and frees its devices.
func (s *Snapshot) DeleteResourceClaim(namespace, name string) {
	key := claimKey{namespace, name}
	previous := s.claims[key]
	if previous == nil {
		return
	}
	s.replaceClaim(key, previous, nil, nil)
	s.onUndo(func() { s.replaceClaim(key, nil, previous, nil) })
}

// replaceClaim puts new in old's place; facts are new's when known.
func (s *Snapshot) replaceClaim(key claimKey, old, new *resourceapi.ResourceClaim, facts *claimFacts) {
	if old != nil {
		s.allocated.remove(old)
		delete(s.claimsByUID, old.UID)
		delete(s.claims, key)
		if owner, ok := extendedResourceClaimOwner(old); ok && s.xrClaims[owner] == old {
			delete(s.xrClaims, owner)
		}
	}
	if new != nil {
		var ids []structured.DeviceID // nil: made by apply, as nothing is kept of a simulation's claims
		var owner types.UID
		var xr bool
		if facts != nil {
			ids, owner, xr = facts.ids, facts.owner, facts.xr
		} else {
			owner, xr = extendedResourceClaimOwner(new)
		}
		s.allocated.apply(new, ids, true)
		s.claims[key] = new
		if new.UID != "" {
			s.claimsByUID[new.UID] = new
		}
		if xr {
			s.xrClaims[owner] = new
		}
	}
	s.claimList = nil
}

// ExtendedResourceClaimOf returns the extended-resource claim owned by the
// pod with this UID (annotation plus controller reference), or nil.
func (s *Snapshot) ExtendedResourceClaimOf(podUID types.UID) *resourceapi.ResourceClaim {
	return s.xrClaims[podUID]
}

func extendedResourceClaimOwner(c *resourceapi.ResourceClaim) (types.UID, bool) {
	if c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		return "", false
	}
	ref := metav1.GetControllerOfNoCopy(c)
	if ref == nil || ref.Kind != "Pod" {
		return "", false
	}
	return ref.UID, true
}

// ResourceClaim returns a stored claim, or nil.
func (s *Snapshot) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	return s.claims[claimKey{namespace, name}]
}

// AllResourceClaims returns every stored claim, sorted by namespace, then
// name.
func (s *Snapshot) AllResourceClaims() []*resourceapi.ResourceClaim {
	if s.claimList == nil {
		s.claimList = make([]*resourceapi.ResourceClaim, 0, len(s.claims))
		for _, c := range s.claims {
			s.claimList = append(s.claimList, c)
		}
		slices.SortFunc(s.claimList, func(a, b *resourceapi.ResourceClaim) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
	}
	return s.claimList
}

// PendingAllocations returns the claims signalled in Reserve since the last
// ClearPendingAllocations, keyed by the UID the plugin used.
func (s *Snapshot) PendingAllocations() map[types.UID]*resourceapi.ResourceClaim {
	return s.pending
}

// ClearPendingAllocations forgets in-flight allocations once the caller has
// committed or abandoned them.
func (s *Snapshot) ClearPendingAllocations() {
	clear(s.pending)
}

type sliceLister struct{ s *Snapshot }

func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	if sc := l.s.scope; sc != nil && sc.nodes != nil {
		return sc.slices(l.s), nil
	}
	return l.s.AllResourceSlices(), nil
}

type podGroupLister struct{ s *Snapshot }

func (l podGroupLister) Get(namespace, name string) (*schedulingapi.PodGroup, error) {
	if pg := l.s.PodGroup(namespace, name); pg != nil {
		return pg, nil
	}
	return nil, apierrors.NewNotFound(schedulingapi.Resource("podgroups"), namespace+"/"+name)
}

// claimTracker is the snapshot seen as the framework's ResourceClaimTracker.
// Allocations signalled in Reserve are kept apart (pending) until the
// placement engine commits them, exactly like in-flight allocations in the scheduler.
type claimTracker struct{ s *Snapshot }

func (t claimTracker) List() ([]*resourceapi.ResourceClaim, error) {
	var all []*resourceapi.ResourceClaim
	if sc := t.s.scope; sc != nil {
		all = sc.claims(t.s)
	} else {
		all = t.s.AllResourceClaims()
	}
	if len(t.s.pending) == 0 {
		return all, nil
	}
	out := make([]*resourceapi.ResourceClaim, 0, len(all)+len(t.s.pending))
	for _, c := range all {
		if p, ok := t.s.pending[c.UID]; ok {
			c = p
		}
		out = append(out, c)
	}
	for uid, p := range t.s.pending {
		if t.s.claimsByUID[uid] == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func (t claimTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c := t.s.claims[claimKey{namespace, name}]; c != nil {
		if p, ok := t.s.pending[c.UID]; ok {
			return p, nil
		}
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (t claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	state, err := t.GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	return state.AllocatedDevices, nil
}

// GatherAllocatedState returns the live index (the allocator only reads it)
// unless allocations are in flight, in which case it returns a copy with
// them added.
func (t claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	a := &t.s.allocated
	if len(t.s.pending) == 0 {
		return &structured.AllocatedState{
			AllocatedDevices:         a.ids,
			AllocatedSharedDeviceIDs: a.shared,
			AggregatedCapacity:       a.capacity,
		}, nil
	}
	withPending := a.clone()
	for _, c := range t.s.pending {
		if committed := t.s.claimsByUID[c.UID]; committed != nil {
			withPending.remove(committed)
		}
		withPending.add(c)
	}
	return &structured.AllocatedState{
		AllocatedDevices:         withPending.ids,
		AllocatedSharedDeviceIDs: withPending.shared,
		AggregatedCapacity:       withPending.capacity,
	}, nil
}

func (t claimTracker) SignalClaimPendingAllocation(claimUID types.UID, allocatedClaim *resourceapi.ResourceClaim) error {
	if allocatedClaim == nil || allocatedClaim.Status.Allocation == nil {
		return fmt.Errorf("claim %s: pending allocation without allocation result", claimUID)
	}
	t.s.pending[claimUID] = allocatedClaim
	return nil
}

func (t claimTracker) GetPendingAllocation(claimUID types.UID) *resourceapi.AllocationResult {
	if c, ok := t.s.pending[claimUID]; ok {
		return c.Status.Allocation
	}
	return nil
}

func (t claimTracker) MaybeRemoveClaimPendingAllocation(claimUID types.UID, _ bool) bool {
	_, ok := t.s.pending[claimUID]
	delete(t.s.pending, claimUID)
	return ok
}

// AssumeClaimAfterAPICall and AssumedClaimRestore belong to the binding
// phase, which a simulation never runs; the placement engine commits instead.
func (t claimTracker) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error { return nil }
func (t claimTracker) AssumedClaimRestore(string, string)                       {}
