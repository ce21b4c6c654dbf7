package snapshot

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
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
// used since the one before are dropped. It keeps what setting a claim
// derives from it likewise (claimfacts.go). Not safe for concurrent use.
type PodInfos struct {
	// entries are by pod version, each with the last build that used it:
	// one lookup a pod, where a map of the last build's entries and one of
	// this build's took three.
	entries map[podVersion]*podEntry
	// byObject are the same entries by pod object, looked up first: a
	// pointer hashes and compares without reading the strings of a
	// version, which at 45,000 pods mostly miss the CPU's caches. An
	// entry found there is used only for the object's current version.
	byObject map[*v1.Pod]*podEntry
	build    int
	// alike holds, per podShape, the last few pod infos computed in this
	// build: most bound pods of a fleet ask what many others ask (replicas,
	// or pods of one template under different owners), so a new pod's info
	// is a copy of one of them (sameRequestsAndTerms checked), as
	// AddPodLike copies one. Computing requests allocates some 10 kB a
	// pod: a cold build of 45,000 pods spent half a GB on it.
	alike map[podShape][]*framework.PodInfo
	// claims keep, by claim object, what setting a claim derives from it
	// (claimfacts.go), claimBuild counting the builds as build does.
	claims     map[*resourceapi.ResourceClaim]*claimEntry
	claimBuild int
}

// podShape is a cheap key for pods that may share pod info: what
// sameRequestsAndTerms compares first.
type podShape struct {
	namespace, firstContainer  string
	containers, initContainers int
	milliCPU, memory           int64
}

// maxAlike bounds the infos kept per shape, so pods that share a shape
// but not requests cost a few comparisons each, not one per pod.
const maxAlike = 4

func shapeOf(p *v1.Pod) podShape {
	k := podShape{namespace: p.Namespace, containers: len(p.Spec.Containers), initContainers: len(p.Spec.InitContainers)}
	if len(p.Spec.Containers) > 0 {
		c := &p.Spec.Containers[0]
		cpu, mem := c.Resources.Requests[v1.ResourceCPU], c.Resources.Requests[v1.ResourceMemory]
		k.firstContainer, k.milliCPU, k.memory = c.Name, cpu.MilliValue(), mem.Value()
	}
	return k
}

type podVersion struct {
	uid             types.UID
	resourceVersion string
}

type podEntry struct {
	info    *framework.PodInfo
	version podVersion
	used    int // the last build that used it
}

// NewPodInfos returns an empty cache.
func NewPodInfos() *PodInfos {
	return &PodInfos{}
}

// startBuild begins a snapshot build of n pods: entries the previous
// build did not use are dropped.
func (c *PodInfos) startBuild(n int) {
	c.build++
	if c.entries == nil {
		c.entries = make(map[podVersion]*podEntry, n)
		c.byObject = make(map[*v1.Pod]*podEntry, n)
	}
	for key, e := range c.entries {
		if e.used < c.build-1 {
			delete(c.entries, key)
		}
	}
	for key, e := range c.byObject {
		if e.used < c.build-1 {
			delete(c.byObject, key)
		}
	}
	c.alike = map[podShape][]*framework.PodInfo{}
}

// infoFor returns pod info for p, computed or from the cache: shared,
// to be copied, never handed out. A pod without a UID and resourceVersion
// is not cached across builds.
func (c *PodInfos) infoFor(p *v1.Pod) *framework.PodInfo {
	if p.UID == "" || p.ResourceVersion == "" {
		// Not kept for the next build, but still shared with pods alike
		// in this one.
		return c.replicaOf(p)
	}
	e := c.entry(p)
	e.used = c.build
	return e.info
}

// entry is p's entry, found by object or by version, or made.
func (c *PodInfos) entry(p *v1.Pod) *podEntry {
	if e, ok := c.byObject[p]; ok && e.version.uid == p.UID && e.version.resourceVersion == p.ResourceVersion {
		return e
	}
	key := podVersion{uid: p.UID, resourceVersion: p.ResourceVersion}
	e, ok := c.entries[key]
	if !ok {
		e = &podEntry{info: c.replicaOf(p), version: key}
		c.entries[key] = e
	}
	c.byObject[p] = e
	return e
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
	infos.startBuild(len(pods))
	// The pods' own infos, allocated at once rather than one by one.
	own := make([]framework.PodInfo, len(pods))
	for i, p := range pods {
		own[i] = *infos.infoFor(p)
		own[i].Pod = p
		if err := s.addPod(p, &own[i]); err != nil {
			return err
		}
	}
	return nil
}

// replicaOf computes p's pod info, or copies that of a pod alike:
// computing one is most of a cold build at fleet size (requests summed
// twice per pod).
func (c *PodInfos) replicaOf(p *v1.Pod) *framework.PodInfo {
	key := shapeOf(p)
	alike := c.alike[key]
	for _, like := range alike {
		if sameRequestsAndTerms(like.Pod, p) {
			// Shared, not copied: entries are never handed out, infoFor
			// copies them with their own pod.
			return like
		}
	}
	// As NodeInfo.AddPod: invalid affinity terms are the API server's to
	// reject, not a reason to leave the pod out.
	info, _ := framework.NewPodInfo(p)
	info.CalculateResource() // computed once, kept in the entry
	if len(alike) < maxAlike {
		c.alike[key] = append(alike, info)
	}
	return info
}
