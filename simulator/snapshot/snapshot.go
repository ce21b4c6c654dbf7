// Package snapshot holds the simulated cluster state that the scheduler
// framework reads: nodes with their pods, ResourceSlices, DeviceClasses,
// ResourceClaims and ResourceClaimTemplates.
//
// It implements the framework's SharedLister and SharedDRAManager, so the
// upstream plugins run unchanged on top of it. Fork, Revert and Commit nest:
// every mutation made after a Fork records its inverse in an undo log, so a
// fork costs nothing and a revert costs only what changed since the fork
// (no copies of untouched nodes or claims).
package snapshot

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"draxr.dev/draxr/scheduler/classes"
	"draxr.dev/draxr/scheduler/devicefull"
)

// Snapshot is a mutable, forkable view of a cluster. It is not safe for
// concurrent mutation; the framework's concurrent readers are fine.
type Snapshot struct {
	logger klog.Logger

	nodes     map[string]*framework.NodeInfo
	nodeOrder []string // insertion order, so List is deterministic
	lists     nodeLists

	podsByUID map[types.UID]podRef
	// knownInfo keeps the scheduler's pod info (requests computed) of pods
	// placed or removed, for when they are placed again: a drain
	// simulation moves every pod it evicts, a scale-up estimates the same
	// pending pods on every group's template (reverted in between), and
	// computing a pod's requests is most of what adding it costs.
	knownInfo map[types.UID]*framework.PodInfo

	classes *classes.Index

	slices       map[string]*resourceapi.ResourceSlice
	slicesByNode map[string][]*resourceapi.ResourceSlice
	sliceList    []*resourceapi.ResourceSlice // nil when stale
	// sliceDevices caches what HasFreeDevice needs of each slice, filled
	// on first use and dropped with the slice.
	sliceDevices map[*resourceapi.ResourceSlice]devicefull.Slice
	taintRules   []*resourceapi.DeviceTaintRule

	claims      map[claimKey]*resourceapi.ResourceClaim
	claimsByUID map[types.UID]*resourceapi.ResourceClaim
	xrClaims    map[types.UID]*resourceapi.ResourceClaim // extended-resource claims by owning pod UID
	claimList   []*resourceapi.ResourceClaim             // nil when stale
	templates   map[string]*resourceapi.ResourceClaimTemplate
	// podGroups are PodGroups by namespace/name.
	podGroups map[string]*schedulingapi.PodGroup
	allocated allocatedDevices
	pending   map[types.UID]*resourceapi.ResourceClaim // signalled in Reserve, not yet committed
	pvcUsers  map[string]int

	scope      *cycleScope // non-nil while the placement engine schedules one pod
	scopeStore cycleScope
	// unscoped turns SetCycleScope off; only tests set it (export_test.go),
	// to check that scoped listers place pods as unscoped ones do.
	unscoped bool

	undo      []func()
	forkMarks []int
	log       changeLog
}

type podRef struct {
	pod      *v1.Pod
	nodeName string
}

// New returns an empty snapshot.
func New() *Snapshot { return NewSized(0, 0) }

// NewSized returns an empty snapshot with room for pods pods and claims
// claims (the cluster's, and those a scale-up adds for its pending pods):
// a map grown one entry at a time to thousands allocates about twice what
// it ends up holding, and a scale-up of thousands of pods fills several.
func NewSized(pods, claims int) *Snapshot {
	allocated := newAllocatedDevices()
	allocated.ids = make(sets.Set[structured.DeviceID], claims)
	return &Snapshot{
		logger:       klog.Background(),
		nodes:        map[string]*framework.NodeInfo{},
		podsByUID:    make(map[types.UID]podRef, pods),
		knownInfo:    map[types.UID]*framework.PodInfo{},
		classes:      classes.NewIndex(),
		slices:       map[string]*resourceapi.ResourceSlice{},
		slicesByNode: map[string][]*resourceapi.ResourceSlice{},
		sliceDevices: map[*resourceapi.ResourceSlice]devicefull.Slice{},
		claims:       make(map[claimKey]*resourceapi.ResourceClaim, claims),
		claimsByUID:  make(map[types.UID]*resourceapi.ResourceClaim, claims),
		xrClaims:     make(map[types.UID]*resourceapi.ResourceClaim, claims),
		templates:    map[string]*resourceapi.ResourceClaimTemplate{},
		podGroups:    map[string]*schedulingapi.PodGroup{},
		allocated:    allocated,
		pending:      map[types.UID]*resourceapi.ResourceClaim{},
		pvcUsers:     map[string]int{},
	}
}

// Fork starts a nested scope whose changes Revert can undo.
func (s *Snapshot) Fork() {
	s.forkMarks = append(s.forkMarks, len(s.undo))
}

// Revert undoes every change since the matching Fork.
func (s *Snapshot) Revert() {
	if len(s.forkMarks) == 0 {
		return
	}
	mark := s.forkMarks[len(s.forkMarks)-1]
	s.forkMarks = s.forkMarks[:len(s.forkMarks)-1]
	if mark < len(s.undo) {
		s.log.newEra()
	}
	for i := len(s.undo) - 1; i >= mark; i-- {
		s.undo[i]()
		s.undo[i] = nil
	}
	s.undo = s.undo[:mark]
}

// Commit keeps the changes of the innermost fork. They become part of the
// enclosing fork, if any, so an outer Revert still undoes them.
func (s *Snapshot) Commit() {
	if len(s.forkMarks) == 0 {
		return
	}
	s.forkMarks = s.forkMarks[:len(s.forkMarks)-1]
	if len(s.forkMarks) == 0 {
		clear(s.undo)
		s.undo = s.undo[:0]
	}
}

// ForkDepth is the number of open forks.
func (s *Snapshot) ForkDepth() int { return len(s.forkMarks) }

// onUndo records the inverse of a change, only while a fork is open.
// claimKey is a claim's namespace and name: a key that needs no string
// built for every lookup and store, which thousands of placed pods make.
type claimKey struct{ namespace, name string }

func (s *Snapshot) onUndo(f func()) {
	if s.forking() {
		s.undo = append(s.undo, f)
	}
}

// forking reports an open fork, whose changes are recorded to be undone.
// Callers that change the snapshot often ask first: an undo closure is
// made (allocated) wherever it is written, even if onUndo drops it.
func (s *Snapshot) forking() bool { return len(s.forkMarks) > 0 }

// DeviceClasses exposes the class index (lister and resolver).
func (s *Snapshot) Classes() *classes.Index { return s.classes }

// SetDeviceClass adds or replaces a DeviceClass.
func (s *Snapshot) SetDeviceClass(class *resourceapi.DeviceClass) {
	previous := s.classes.Set(class)
	s.onUndo(func() {
		if previous != nil {
			s.classes.Set(previous)
		} else {
			s.classes.Delete(class.Name)
		}
	})
}

// DeleteDeviceClass removes a DeviceClass.
func (s *Snapshot) DeleteDeviceClass(name string) {
	if previous := s.classes.Delete(name); previous != nil {
		s.onUndo(func() { s.classes.Set(previous) })
	}
}

// SetResourceClaimTemplate adds or replaces a ResourceClaimTemplate.
func (s *Snapshot) SetResourceClaimTemplate(t *resourceapi.ResourceClaimTemplate) {
	key := t.Namespace + "/" + t.Name
	previous := s.templates[key]
	s.templates[key] = t
	s.onUndo(func() {
		if previous != nil {
			s.templates[key] = previous
		} else {
			delete(s.templates, key)
		}
	})
}

// ResourceClaimTemplate returns a template, or nil.
func (s *Snapshot) ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate {
	return s.templates[namespace+"/"+name]
}

// AllocatedDeviceIDs returns the set of devices held by allocated claims.
// The set is live: callers must not modify it.
func (s *Snapshot) AllocatedDeviceIDs() sets.Set[structured.DeviceID] {
	return s.allocated.ids
}

var (
	_ fwk.SharedLister     = &Snapshot{}
	_ fwk.SharedDRAManager = &Snapshot{}
)
