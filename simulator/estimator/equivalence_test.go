package estimator

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Prepare computes on every core the keys Of and Alike compute one by one:
// same keys for owned and unowned pods, pods with affinity (whose Alike is
// their Of) and a pod listed twice.
func TestPrepareGivesTheKeysOfAndAlikeGive(t *testing.T) {
	var pods []*v1.Pod
	for i := 0; i < 3000; i++ {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: []string{"a", "b"}[i%2]},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100*(i%7+1)))},
			}}}},
		}
		if i%3 == 0 {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr.To(true)}}
		}
		if i%5 == 0 {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
		}
		pods = append(pods, p)
	}
	pods = append(pods, pods[7]) // listed twice
	var lazy, prepared Kinds
	prepared.Prepare(pods)
	for _, p := range pods {
		if got, want := prepared.Of(p), lazy.Of(p); got != want {
			t.Fatalf("%s: Prepare's Of %q, one by one %q", p.Name, got, want)
		}
		if got, want := prepared.Alike(p), lazy.Alike(p); got != want {
			t.Fatalf("%s: Prepare's Alike %q, one by one %q", p.Name, got, want)
		}
	}
	if prepared.Of(pods[0]) == prepared.Of(pods[1]) {
		t.Fatal("pods of different namespaces and requests share a key: the test checks nothing")
	}
}
