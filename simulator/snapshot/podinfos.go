package snapshot

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PodInfos keeps the scheduler's pod info of bound pods (requests and
// affinity terms computed) from one snapshot build to the next. The
// autoscaler builds a snapshot from its informers' objects every loop;
// computing every running pod's requests again is most of what a quiet
// loop costs at fleet size. An entry stands for one version of a pod: its
// UID and resourceVersion, which the API server changes with any change
// to the pod. A pod without either is never cached. Entries no build has
// used since the one before are dropped. Not safe for concurrent use.
type PodInfos struct {
	last, current map[podVersion]*framework.PodInfo
	// byOwner is, per controller (namespace and owner UID), the last pod
	// info computed in this build: replicas share requests and terms,
	// so a new replica's info is a copy of it (sameRequestsAndTerms
	// checked), as AddPodLike copies one.
	byOwner map[ownerKey]*framework.PodInfo
}

type ownerKey struct {
	namespace string
	owner     types.UID
}

type podVersion struct {
	uid             types.UID
	resourceVersion string
}

// NewPodInfos returns an empty cache.
func NewPodInfos() *PodInfos {
	return &PodInfos{current: map[podVersion]*framework.PodInfo{}}
}

// startBuild begins a snapshot build: entries the previous build did not
// use are dropped.
func (c *PodInfos) startBuild() {
	c.last, c.current = c.current, make(map[podVersion]*framework.PodInfo, len(c.current))
	c.byOwner = map[ownerKey]*framework.PodInfo{}
}

// infoFor returns pod info for p, computed or from the cache, as a copy
// whose Pod is p; nil when p cannot be cached.
func (c *PodInfos) infoFor(p *v1.Pod) *framework.PodInfo {
	if p.UID == "" || p.ResourceVersion == "" {
		return nil
	}
	key := podVersion{uid: p.UID, resourceVersion: p.ResourceVersion}
	info, ok := c.current[key]
	if !ok {
		if info, ok = c.last[key]; !ok {
			info = c.replicaOf(p)
		}
		c.current[key] = info
	}
	out := *info
	out.Pod = p
	return &out
}

// AddBoundPods starts a build with infos and adds the pods as AddPod
// does, with their pod info from infos where it has them. infos may be
// nil.
func (s *Snapshot) AddBoundPods(pods []*v1.Pod, infos *PodInfos) error {
	if infos == nil {
		for _, p := range pods {
			if err := s.AddPod(p); err != nil {
				return err
			}
		}
		return nil
	}
	infos.startBuild()
	for _, p := range pods {
		info := infos.infoFor(p)
		if err := s.addPod(p, info); err != nil {
			return err
		}
	}
	return nil
}

// replicaOf computes p's pod info, or copies a replica's: computing one
// is most of a cold build at fleet size (requests summed twice per pod).
func (c *PodInfos) replicaOf(p *v1.Pod) *framework.PodInfo {
	var key ownerKey
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		key = ownerKey{namespace: p.Namespace, owner: ref.UID}
		if like := c.byOwner[key]; like != nil && sameRequestsAndTerms(like.Pod, p) {
			info := *like // keeps the cached requests
			info.Pod = p
			return &info
		}
	}
	// As NodeInfo.AddPod: invalid affinity terms are the API server's to
	// reject, not a reason to leave the pod out.
	info, _ := framework.NewPodInfo(p)
	info.CalculateResource() // computed once, kept in the entry
	if key.owner != "" {
		c.byOwner[key] = info
	}
	return info
}
