package snapshot

import (
	v1 "k8s.io/api/core/v1"
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
			// As NodeInfo.AddPod: invalid affinity terms are the API
			// server's to reject, not a reason to leave the pod out.
			info, _ = framework.NewPodInfo(p)
			info.CalculateResource() // computed once, kept in the entry
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
