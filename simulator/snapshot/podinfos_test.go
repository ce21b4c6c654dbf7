package snapshot

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// Pod info carried from one build to the next stands for one version of a
// pod: a changed pod (new resourceVersion) or one without a version is
// computed again, and an entry no build used since the last is dropped.
func TestPodInfosFollowPodVersions(t *testing.T) {
	infos := NewPodInfos()
	pod := func(uid, rv string, milliCPU int64) *v1.Pod {
		p := fx.Pod(uid, milliCPU, nil)
		p.UID, p.ResourceVersion, p.Spec.NodeName = types.UID("uid-"+uid), rv, "n"
		return p
	}
	build := func(pods ...*v1.Pod) int64 {
		t.Helper()
		s := New()
		if err := s.AddNode(fx.Node("n", 32, 64, nil)); err != nil {
			t.Fatal(err)
		}
		if err := s.AddBoundPods(pods, infos); err != nil {
			t.Fatal(err)
		}
		ni := s.NodeInfo("n")
		if len(ni.Pods) != len(pods) || ni.Pods[0].GetPod() != pods[0] {
			t.Fatalf("node holds %d pods (first %v), want the %d given", len(ni.Pods), ni.Pods[0].GetPod().Name, len(pods))
		}
		return ni.Requested.MilliCPU
	}
	steps := []struct {
		name string
		pods []*v1.Pod
		want int64
	}{
		{"first build computes", []*v1.Pod{pod("a", "1", 1000)}, 1000},
		{"a new version is computed again", []*v1.Pod{pod("a", "2", 3000)}, 3000},
		// The API server never changes a pod without a new version: a
		// different spec under the same one shows the entry was reused.
		{"the same version is reused", []*v1.Pod{pod("a", "2", 7000)}, 3000},
		{"a pod without a version is never cached", []*v1.Pod{pod("a", "", 5000)}, 5000},
		{"no version, again", []*v1.Pod{pod("a", "", 6000)}, 6000},
		{"another pod", []*v1.Pod{pod("b", "1", 1000)}, 1000},
		{"a's entry was unused for a build and is gone", []*v1.Pod{pod("a", "2", 2000)}, 2000},
		// a's entry is the last build's (2000m); b's was dropped with it.
		{"two pods", []*v1.Pod{pod("a", "2", 9000), pod("b", "1", 9000)}, 2000 + 9000},
	}
	for _, s := range steps {
		if got := build(s.pods...); got != s.want {
			t.Errorf("%s: node requests %dm CPU, want %dm", s.name, got, s.want)
		}
	}
}

// Replicas of one controller share the pod info computed for the first
// of them, but only where their requests and terms are the same: a
// resized replica, one of another controller, or one in another
// namespace is computed for itself. Every pod's own object stays its
// info's pod.
func TestPodInfosCopyReplicas(t *testing.T) {
	pod := func(name, ns, owner string, milliCPU int64) *v1.Pod {
		p := fx.Pod(name, milliCPU, nil)
		p.Namespace, p.UID, p.ResourceVersion, p.Spec.NodeName = ns, types.UID("uid-"+name), "1", "n"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner,
			UID: types.UID("rs-" + owner), Controller: ptr.To(true)}}
		return p
	}
	pods := []*v1.Pod{
		pod("web-1", "default", "web", 1000), pod("web-2", "default", "web", 1000),
		pod("web-3", "default", "web", 4000), // resized: not a copy
		pod("api-1", "default", "api", 2000),
		pod("web-x", "other", "web", 500), // another namespace
	}
	s := New()
	if err := s.AddNode(fx.Node("n", 32, 64, nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddBoundPods(pods, NewPodInfos()); err != nil {
		t.Fatal(err)
	}
	ni := s.NodeInfo("n")
	if got, want := ni.Requested.MilliCPU, int64(1000+1000+4000+2000+500); got != want {
		t.Errorf("node requests %dm CPU, want %dm", got, want)
	}
	for i, pi := range ni.Pods {
		if pi.GetPod() != pods[i] {
			t.Errorf("pod info %d stands for %s, want %s", i, pi.GetPod().Name, pods[i].Name)
		}
	}
}

// A pod's info stands for another's only where everything the scheduler
// computes it from is the same, owner or not: what running replicas
// differ in (names, container IDs, restarts, limits) does not count, a
// resize in the status or a renamed container does. Wherever two pods are
// judged alike, the scheduler computes the same info for both.
func TestPodsAlikeShareInfo(t *testing.T) {
	base := func() *v1.Pod {
		p := fx.Pod("a", 1000, fx.GPUs(fx.GPUResource, 1))
		p.Spec.NodeName = "n"
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main", ContainerID: "containerd://a", RestartCount: 1,
			AllocatedResources: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			Resources:          &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000m")}}}}
		return p
	}
	cases := []struct {
		name   string
		change func(*v1.Pod)
		alike  bool
	}{
		{"another pod of the template", func(p *v1.Pod) {
			p.Name, p.UID, p.Spec.NodeName = "b", "uid-b", "m"
			p.Status.ContainerStatuses[0].ContainerID, p.Status.ContainerStatuses[0].RestartCount = "containerd://b", 0
		}, true},
		{"other limits", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("4") }, true},
		{"another namespace", func(p *v1.Pod) { p.Namespace = "other" }, false},
		{"more CPU", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2") }, false},
		{"a renamed container", func(p *v1.Pod) { p.Spec.Containers[0].Name = "other" }, false},
		{"a resize allocated", func(p *v1.Pod) {
			p.Status.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU] = resource.MustParse("3")
		}, false},
		{"no actuated requests", func(p *v1.Pod) { p.Status.ContainerStatuses[0].Resources = nil }, false},
		{"an infeasible resize", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible}}
		}, false},
		{"overhead", func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")} }, false},
		{"pod-level requests", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
		}, false},
		{"a sidecar", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{fx.InitContainer("proxy", 500, nil, true)}
		}, false},
		{"anti-affinity", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}}}
		}, false},
		{"a node-allocatable claim", func(p *v1.Pod) {
			q := resource.MustParse("1Gi")
			p.Status.NodeAllocatableResourceClaimStatuses = []v1.NodeAllocatableResourceClaimStatus{{
				ResourceClaimName: "c", Mapping: []v1.NodeAllocatableMappedResources{{Name: v1.ResourceMemory, Quantity: &q}}}}
		}, false},
	}
	for _, c := range cases {
		a, b := base(), base()
		c.change(b)
		if got := sameRequestsAndTerms(a, b); got != c.alike {
			t.Errorf("%s: alike %v, want %v", c.name, got, c.alike)
		}
		if !c.alike {
			continue
		}
		ia, _ := framework.NewPodInfo(a)
		ib, _ := framework.NewPodInfo(b)
		ra, rb := ia.CalculateResource(), ib.CalculateResource()
		if !reflect.DeepEqual(ra, rb) || !reflect.DeepEqual(ia.RequiredAntiAffinityTerms, ib.RequiredAntiAffinityTerms) {
			t.Errorf("%s: judged alike, but the scheduler computes %+v and %+v", c.name, ra.Resource, rb.Resource)
		}
	}

	// In a build, pods without an owner share too, and a resized pod of
	// the same spec counts what its status allocated.
	p1, p2, resized := base(), base(), base()
	for i, p := range []*v1.Pod{p1, p2, resized} {
		p.UID, p.ResourceVersion = types.UID(fmt.Sprintf("uid-%d", i)), "1"
	}
	resized.Status.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU] = resource.MustParse("3")
	s := New()
	if err := s.AddNode(fx.Node("n", 32, 64, nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddBoundPods([]*v1.Pod{p1, p2, resized}, NewPodInfos()); err != nil {
		t.Fatal(err)
	}
	if got, want := s.NodeInfo("n").Requested.MilliCPU, int64(1000+1000+3000); got != want {
		t.Errorf("node requests %dm CPU, want %dm", got, want)
	}
}

// An entry found by pod object stands for that object's version only:
// the same object edited in place under a new resourceVersion is
// computed again in the next build.
func TestPodInfosFollowObjectsEditedInPlace(t *testing.T) {
	infos := NewPodInfos()
	p := fx.Pod("a", 1000, nil)
	p.UID, p.ResourceVersion, p.Spec.NodeName = "uid-a", "1", "n"
	build := func() int64 {
		t.Helper()
		s := New()
		if err := s.AddNode(fx.Node("n", 32, 64, nil)); err != nil {
			t.Fatal(err)
		}
		if err := s.AddBoundPods([]*v1.Pod{p}, infos); err != nil {
			t.Fatal(err)
		}
		return s.NodeInfo("n").Requested.MilliCPU
	}
	if got := build(); got != 1000 {
		t.Fatalf("first build: %dm CPU, want 1000m", got)
	}
	p.ResourceVersion = "2"
	p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("3")
	if got := build(); got != 3000 {
		t.Errorf("the object edited under a new version: %dm CPU, want 3000m", got)
	}
	p.UID = "uid-b"
	p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("5")
	if got := build(); got != 5000 {
		t.Errorf("the object edited under a new UID: %dm CPU, want 5000m", got)
	}
}
