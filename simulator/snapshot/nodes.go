package snapshot

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nodeLists caches what NodeInfoLister returns; the framework asks for them
// in every PreFilter, so they are rebuilt only when nodes come and go or a
// pod with (anti-)affinity moves.
type nodeLists struct {
	all, affinity, antiAffinity, nonHostAntiAffinity           []fwk.NodeInfo
	allValid, affinityValid, antiAffValid, nonHostAntiAffValid bool
}

func (l *nodeLists) invalidate() {
	l.allValid = false
	l.invalidateAffinity()
}

func (l *nodeLists) invalidateAffinity() {
	l.affinityValid, l.antiAffValid, l.nonHostAntiAffValid = false, false, false
}

// added puts a new node, last in node order and with no pods, at the end
// of the list of all nodes when it is valid: rebuilding walks every node,
// once per node an estimate opens. The affinity lists do not hold a node
// without pods.
func (l *nodeLists) added(ni *framework.NodeInfo) {
	if l.allValid {
		l.all = append(l.all, ni)
	}
}

// removedLast takes back added: the node is last in node order, and its
// pods were taken off first (the affinity lists were made invalid then if
// any pod of it had affinity).
func (l *nodeLists) removedLast(ni *framework.NodeInfo) {
	if n := len(l.all); l.allValid && n > 0 && l.all[n-1] == fwk.NodeInfo(ni) {
		l.all[n-1] = nil
		l.all = l.all[:n-1]
		return
	}
	l.allValid = false
}

// drop takes a removed node out of the lists that are valid, in place as
// a rebuild would be: rebuilding walks every node, once per node a drain
// simulation removes.
func (l *nodeLists) drop(ni *framework.NodeInfo) {
	for _, list := range []struct {
		nodes *[]fwk.NodeInfo
		valid bool
	}{{&l.all, l.allValid}, {&l.affinity, l.affinityValid}, {&l.antiAffinity, l.antiAffValid}, {&l.nonHostAntiAffinity, l.nonHostAntiAffValid}} {
		if list.valid {
			*list.nodes = slices.DeleteFunc(*list.nodes, func(x fwk.NodeInfo) bool { return x == fwk.NodeInfo(ni) })
		}
	}
}

// AddNode adds a node with no pods.
func (s *Snapshot) AddNode(node *v1.Node) error {
	if _, ok := s.nodes[node.Name]; ok {
		return fmt.Errorf("node %s already exists in the snapshot", node.Name)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	s.nodes[node.Name] = ni
	s.nodeOrder = append(s.nodeOrder, node.Name)
	s.lists.added(ni)
	s.log.nodeAdded(ni)
	if s.forking() {
		s.onUndo(func() {
			delete(s.nodes, node.Name)
			s.nodeOrder = s.nodeOrder[:len(s.nodeOrder)-1]
			s.lists.removedLast(ni)
		})
	}
	return nil
}

// RemoveNode removes a node, its pods and the ResourceSlices local to it.
// Claims of its pods stay; callers remove pods first when they want them freed.
func (s *Snapshot) RemoveNode(name string) error {
	ni, ok := s.nodes[name]
	if !ok {
		return fmt.Errorf("node %s not found in the snapshot", name)
	}
	for _, p := range slices.Clone(ni.Pods) {
		if err := s.RemovePod(p.GetPod().UID); err != nil {
			return err
		}
	}
	for _, slice := range slices.Clone(s.slicesByNode[name]) {
		s.RemoveResourceSlice(slice.Name)
	}
	idx := slices.Index(s.nodeOrder, name)
	delete(s.nodes, name)
	s.nodeOrder = slices.Delete(s.nodeOrder, idx, idx+1)
	s.lists.drop(ni)
	s.log.newEra()
	s.onUndo(func() {
		s.nodes[name] = ni
		s.nodeOrder = slices.Insert(s.nodeOrder, idx, name)
		s.lists.invalidate()
	})
	return nil
}

// NodeInfo returns the scheduler's view of a node, or nil.
func (s *Snapshot) NodeInfo(name string) *framework.NodeInfo {
	return s.nodes[name]
}

// NodeNames returns node names in the order they were added.
func (s *Snapshot) NodeNames() []string { return slices.Clone(s.nodeOrder) }

// NodeCount is the number of nodes.
func (s *Snapshot) NodeCount() int { return len(s.nodeOrder) }

// AddPod records a pod bound to pod.Spec.NodeName. The pod is stored as
// given; callers hand over ownership.
func (s *Snapshot) AddPod(pod *v1.Pod) error {
	info, ok := s.knownInfo[pod.UID]
	if !ok || !sameRequestsAndTerms(info.Pod, pod) {
		return s.addPod(pod, nil)
	}
	moved := *info // keeps the cached requests
	moved.Pod = pod
	return s.addPod(pod, &moved)
}

// sameRequestsAndTerms says whether the scheduler's pod info of a may
// stand for b: everything framework.NewPodInfo and CalculateResource read
// of a pod is the same (namespace and affinity for the terms; each
// container's name, requests and restart policy, overhead and pod-level
// requests; the resize state, allocated and actuated resources and DRA
// node-allocatable claims of the status). Nothing else: running replicas
// differ in container IDs, start times and restarts, which would make every
// pod of a fleet its own. Compared without reflection, as it runs once per
// bound pod of a cold build.
func sameRequestsAndTerms(a, b *v1.Pod) bool {
	if a.Namespace != b.Namespace ||
		!sameContainers(a.Spec.Containers, b.Spec.Containers) || !sameContainers(a.Spec.InitContainers, b.Spec.InitContainers) ||
		!sameList(a.Spec.Overhead, b.Spec.Overhead) || !sameRequirements(a.Spec.Resources, b.Spec.Resources) ||
		!sameStatuses(a.Status.ContainerStatuses, b.Status.ContainerStatuses) ||
		!sameStatuses(a.Status.InitContainerStatuses, b.Status.InitContainerStatuses) ||
		!sameRequirements(a.Status.Resources, b.Status.Resources) || !sameList(a.Status.AllocatedResources, b.Status.AllocatedResources) ||
		resourcehelper.IsPodResizeInfeasible(a) != resourcehelper.IsPodResizeInfeasible(b) {
		return false
	}
	if (a.Spec.Affinity != nil || b.Spec.Affinity != nil) && !apiequality.Semantic.DeepEqual(a.Spec.Affinity, b.Spec.Affinity) {
		return false
	}
	ca, cb := a.Status.NodeAllocatableResourceClaimStatuses, b.Status.NodeAllocatableResourceClaimStatuses
	return len(ca) == 0 && len(cb) == 0 || apiequality.Semantic.DeepEqual(ca, cb)
}

func sameContainers(a, b []v1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ca, cb := &a[i], &b[i]
		if ca.Name != cb.Name || !sameList(ca.Resources.Requests, cb.Resources.Requests) ||
			(ca.RestartPolicy == nil) != (cb.RestartPolicy == nil) || ca.RestartPolicy != nil && *ca.RestartPolicy != *cb.RestartPolicy {
			return false
		}
	}
	return true
}

// sameStatuses compares what the requests helpers read of container
// statuses: the name they are found by and the resources.
func sameStatuses(a, b []v1.ContainerStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !sameList(a[i].AllocatedResources, b[i].AllocatedResources) ||
			!sameRequirements(a[i].Resources, b[i].Resources) {
			return false
		}
	}
	return true
}

// sameRequirements compares requests only: limits do not enter pod info.
func sameRequirements(a, b *v1.ResourceRequirements) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameList(a.Requests, b.Requests)
}

// sameList is semantic equality of quantities; a nil list is not an
// empty one, since the helpers fall back to the spec only on nil.
func sameList(a, b v1.ResourceList) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// AddPodLike is AddPod for a pod whose requests and inter-pod terms are
// those of the placed pod like (a replica of it): the scheduler's
// precomputed pod info is copied instead of computed again.
func (s *Snapshot) AddPodLike(pod *v1.Pod, like types.UID) error {
	ref, ok := s.podsByUID[like]
	if !ok {
		return s.addPod(pod, nil)
	}
	for _, pi := range s.nodes[ref.nodeName].Pods {
		if src, ok := pi.(*framework.PodInfo); ok && src.Pod.UID == like {
			info := *src // keeps the cached requests
			info.Pod = pod
			return s.addPod(pod, &info)
		}
	}
	return s.addPod(pod, nil)
}

func (s *Snapshot) addPod(pod *v1.Pod, info *framework.PodInfo) error {
	ni, ok := s.nodes[pod.Spec.NodeName]
	if !ok {
		return fmt.Errorf("pod %s/%s: spec.nodeName: node %q not found in the snapshot", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	if _, dup := s.podsByUID[pod.UID]; dup {
		return fmt.Errorf("pod %s/%s: metadata.uid %q is already placed", pod.Namespace, pod.Name, pod.UID)
	}
	var scalarsBefore []v1.ResourceName // to drop the zero entries RemovePod leaves
	scalarsWereNil := ni.Requested.ScalarResources == nil
	if len(s.forkMarks) > 0 {
		for name := range ni.Requested.ScalarResources {
			scalarsBefore = append(scalarsBefore, name)
		}
	}
	if info != nil {
		ni.AddPodInfo(info)
	} else {
		ni.AddPod(pod)
		if computed, ok := ni.Pods[len(ni.Pods)-1].(*framework.PodInfo); ok {
			s.knownInfo[pod.UID] = computed
		}
	}
	s.podsByUID[pod.UID] = podRef{pod: pod, nodeName: pod.Spec.NodeName}
	s.trackPVCs(pod, 1)
	s.log.podAdded(ni.Pods[len(ni.Pods)-1], ni)
	if hasAffinity(pod) {
		s.lists.invalidateAffinity()
	}
	if s.forking() { // no closure made for a build's tens of thousands of pods
		s.onUndo(func() { s.undoAddPod(ni, pod, scalarsBefore, scalarsWereNil) })
	}
	return nil
}

// undoAddPod takes back addPod's pod, the last on ni.
func (s *Snapshot) undoAddPod(ni *framework.NodeInfo, pod *v1.Pod, scalarsBefore []v1.ResourceName, scalarsWereNil bool) {
	_ = ni.RemovePod(s.logger, pod) // the pod is last, so order is restored
	for name := range ni.Requested.ScalarResources {
		if !slices.Contains(scalarsBefore, name) {
			delete(ni.Requested.ScalarResources, name)
		}
	}
	if scalarsWereNil && len(ni.Requested.ScalarResources) == 0 {
		ni.Requested.ScalarResources = nil
	}
	delete(s.podsByUID, pod.UID)
	s.trackPVCs(pod, -1)
	if hasAffinity(pod) {
		s.lists.invalidateAffinity()
	}
}

// RemovePod removes a placed pod from its node. It does not touch claims.
func (s *Snapshot) RemovePod(uid types.UID) error {
	ref, ok := s.podsByUID[uid]
	if !ok {
		return fmt.Errorf("pod with uid %q is not placed in the snapshot", uid)
	}
	ni := s.nodes[ref.nodeName]
	var before *framework.NodeInfo
	if len(s.forkMarks) > 0 {
		before = ni.SnapshotConcrete() // removal reorders pods; keep the exact prior view
	}
	for _, pi := range ni.Pods {
		if info, ok := pi.(*framework.PodInfo); ok && info.Pod.UID == uid {
			s.knownInfo[uid] = info
			break
		}
	}
	if err := ni.RemovePod(s.logger, ref.pod); err != nil {
		return err
	}
	delete(s.podsByUID, uid)
	s.trackPVCs(ref.pod, -1)
	s.log.newEra()
	// The node stays in the lists (same NodeInfo); only the affinity
	// lists can change, as in addPod. Rebuilding all of them walks every
	// node, once per pod a drain simulation moves.
	if hasAffinity(ref.pod) {
		s.lists.invalidateAffinity()
	}
	s.onUndo(func() {
		// Restore in place: undo steps recorded earlier (AddPod) hold ni.
		*ni = *before
		s.podsByUID[uid] = ref
		s.trackPVCs(ref.pod, 1)
		if hasAffinity(ref.pod) {
			s.lists.invalidateAffinity()
		}
	})
	return nil
}

// Pod returns a placed pod and its node name.
func (s *Snapshot) Pod(uid types.UID) (*v1.Pod, string, bool) {
	ref, ok := s.podsByUID[uid]
	return ref.pod, ref.nodeName, ok
}

func hasAffinity(p *v1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

func (s *Snapshot) trackPVCs(pod *v1.Pod, delta int) {
	for _, vol := range pod.Spec.Volumes {
		var claimName string
		switch {
		case vol.PersistentVolumeClaim != nil:
			claimName = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claimName = pod.Name + "-" + vol.Name
		default:
			continue
		}
		key := pod.Namespace + "/" + claimName
		s.pvcUsers[key] += delta
		if s.pvcUsers[key] <= 0 {
			delete(s.pvcUsers, key)
		}
	}
}

// NodeInfos implements fwk.SharedLister.
func (s *Snapshot) NodeInfos() fwk.NodeInfoLister { return nodeInfoLister{s} }

// StorageInfos implements fwk.SharedLister.
func (s *Snapshot) StorageInfos() fwk.StorageInfoLister { return storageInfoLister{s} }

// PodGroupStates implements fwk.SharedLister. Gang scheduling (PodGroups,
// beta and off in v1.37) is not simulated: no pod group is ever known.
func (s *Snapshot) PodGroupStates() fwk.PodGroupStateLister { return noPodGroups{} }

// CompositePodGroupStates implements fwk.SharedLister; see PodGroupStates.
func (s *Snapshot) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return noCompositePodGroups{}
}

// CompositePodGroups implements fwk.SharedLister; see PodGroupStates.
func (s *Snapshot) CompositePodGroups() fwk.CompositePodGroupLister {
	return noCompositePodGroupObjects{}
}

// BuildHierarchySnapshotFromPod implements fwk.PodGroupManager, which the
// scheduler's plugins take at construction with GenericWorkload on: the
// gangs themselves are planned by simulator/scaleup, never in a plugin.
func (s *Snapshot) BuildHierarchySnapshotFromPod(*v1.Pod) (fwk.PodGroupManager, error) { return s, nil }

// GetRootKeyForGroup implements fwk.PodGroupManager; see
// BuildHierarchySnapshotFromPod.
func (s *Snapshot) GetRootKeyForGroup(fwk.EntityKey) (fwk.EntityKey, bool, error) {
	return fwk.EntityKey{}, false, nil
}

type nodeInfoLister struct{ s *Snapshot }

func (l nodeInfoLister) List() ([]fwk.NodeInfo, error) {
	return l.s.nodeList(&l.s.lists.all, &l.s.lists.allValid, func(*framework.NodeInfo) bool { return true }), nil
}

func (l nodeInfoLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return l.s.nodeList(&l.s.lists.affinity, &l.s.lists.affinityValid,
		func(ni *framework.NodeInfo) bool { return len(ni.PodsWithAffinity) > 0 }), nil
}

func (l nodeInfoLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return l.s.nodeList(&l.s.lists.antiAffinity, &l.s.lists.antiAffValid,
		func(ni *framework.NodeInfo) bool { return len(ni.PodsWithRequiredAntiAffinity) > 0 }), nil
}

// HavePodsWithRequiredNonHostScopedAntiAffinityList implements
// fwk.NodeInfoLister (v1.37): nodes whose pods' required anti-affinity
// spans more than one host.
func (l nodeInfoLister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return l.s.nodeList(&l.s.lists.nonHostAntiAffinity, &l.s.lists.nonHostAntiAffValid,
		func(ni *framework.NodeInfo) bool { return len(ni.PodsWithRequiredNonHostScopedAntiAffinity) > 0 }), nil
}

// nodeList rebuilds a cached list, in node order, when it is stale.
func (s *Snapshot) nodeList(list *[]fwk.NodeInfo, valid *bool, keep func(*framework.NodeInfo) bool) []fwk.NodeInfo {
	if !*valid {
		*list = (*list)[:0]
		for _, name := range s.nodeOrder {
			if ni := s.nodes[name]; keep(ni) {
				*list = append(*list, ni)
			}
		}
		*valid = true
	}
	return *list
}

func (l nodeInfoLister) Get(nodeName string) (fwk.NodeInfo, error) {
	if ni, ok := l.s.nodes[nodeName]; ok {
		return ni, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("nodes"), nodeName)
}

type storageInfoLister struct{ s *Snapshot }

func (l storageInfoLister) IsPVCUsedByPods(key string) bool { return l.s.pvcUsers[key] > 0 }

type noPodGroups struct{}

func (noPodGroups) Get(namespace, name string) (fwk.PodGroupState, error) {
	return nil, fmt.Errorf("pod group %s/%s: pod groups are not simulated", namespace, name)
}

type noCompositePodGroups struct{}

func (noCompositePodGroups) Get(namespace, name string) (fwk.CompositePodGroupState, error) {
	return nil, fmt.Errorf("composite pod group %s/%s: pod groups are not simulated", namespace, name)
}

type noCompositePodGroupObjects struct{}

func (noCompositePodGroupObjects) Get(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	return nil, apierrors.NewNotFound(schedulingv1alpha3.Resource("compositepodgroups"), namespace+"/"+name)
}
