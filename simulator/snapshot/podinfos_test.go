package snapshot

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
