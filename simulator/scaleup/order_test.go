package scaleup

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/estimator"
	fx "draxr.dev/draxr/simulator/fixtures"
)

func podNames(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func ownedBy(pod *v1.Pod, owner string) *v1.Pod {
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
		Name: owner, UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}
	return pod
}

func TestSortLargestFirstOrder(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	withMemory := func(p *v1.Pod, mem string) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
		return p
	}
	pods := []*v1.Pod{
		fx.Pod("cpu-2", 2000, nil),
		withMemory(fx.Pod("cpu-1-small", 1000, nil), "1Gi"),
		fx.Pod("gpu-1", 100, gpu),
		withMemory(fx.Pod("cpu-1-big", 1000, nil), "4Gi"),
		fx.WithTemplateClaim(fx.Pod("claim", 200, nil), "gpu", "one-gpu"),
		fx.Pod("gpu-2", 100, fx.GPUs(fx.GPUResource, 2)),
	}
	got := podNames(SortLargestFirst(pods, &estimator.Kinds{}))
	// Devices first (two, then one each: a claim counts as one), then CPU,
	// then memory.
	want := []string{"gpu-2", "claim", "gpu-1", "cpu-2", "cpu-1-big", "cpu-1-small"}
	if !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// Requests are summed once per kind: the order must be the one per-pod
// sums give, over kinds that differ in every field PodRequests reads.
func TestSortLargestFirstSumsEachKindOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []func(name string) *v1.Pod{
		func(n string) *v1.Pod { return fx.Pod(n, 1000, nil) },
		func(n string) *v1.Pod { return fx.Pod(n, 500, fx.GPUs(fx.GPUResource, 1)) },
		func(n string) *v1.Pod { return fx.Pod(n, 500, fx.GPUs(fx.GPUResource, 4)) },
		func(n string) *v1.Pod { return fx.WithTemplateClaim(fx.Pod(n, 250, nil), "gpu", "one-gpu") },
		func(n string) *v1.Pod {
			p := fx.Pod(n, 250, nil)
			p.Spec.InitContainers = []v1.Container{fx.InitContainer("sidecar", 2000, nil, true)}
			return p
		},
		func(n string) *v1.Pod {
			p := fx.Pod(n, 250, nil)
			p.Spec.InitContainers = []v1.Container{fx.InitContainer("init", 2000, nil, false)}
			return p
		},
		func(n string) *v1.Pod {
			p := fx.Pod(n, 250, nil)
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
			return p
		},
		func(n string) *v1.Pod {
			p := fx.Pod(n, 250, nil)
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}
			return p
		},
	}
	var pods []*v1.Pod
	for i := range 400 {
		shape := rng.IntN(len(shapes))
		p := ownedBy(shapes[shape](fmt.Sprintf("p-%03d", i)), fmt.Sprintf("rs-%d-%d", shape, rng.IntN(3)))
		pods = append(pods, p)
	}
	kinds := &estimator.Kinds{}
	got := podNames(SortLargestFirst(pods, kinds))

	ks := make([]keyed, len(pods))
	for i, p := range pods {
		ks[i] = requestSums(p)
		ks[i].kind = kinds.Of(p)
	}
	slices.SortStableFunc(ks, largerFirst)
	var want []string
	for _, k := range ks {
		want = append(want, k.pod.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("order with one sum per kind differs from per-pod sums:\n got %v\nwant %v", got, want)
	}
}
