package core

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/buffers"
	cb "draxr.dev/draxr/simulator/capacitybuffer"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/view"
)

// A quiet loop at fleet size (2,500 full 8-GPU nodes, 50 free ones,
// 2,500 CPU nodes of 10 pods) with and without 50 CapacityBuffers of 8
// GPUs each, which the free nodes hold: the buffers' share of the loop's
// CPU (target: <= 10%).
func BenchmarkRunOnceSteadyBuffers(b *testing.B) {
	shape := fleetShape{gpuNodes: 2500, emptyGPUNodes: 50, cpuNodes: 2500, cpuPodsPerNode: 10}
	ctx, client, listers, exp := fleetClient(b, shape)
	for _, n := range []int{0, 50} {
		b.Run(fmt.Sprintf("%d-buffers", n), func(b *testing.B) {
			provider, requested := benchProvider(b, 1000)
			cfg := Config{Client: client, View: listers, Provider: provider, Expander: exp,
				Recorder: &record.FakeRecorder{}, StatusNamespace: "kube-system",
				ScaleDown: ScaleDownConfig{Enabled: true, UtilizationThreshold: 0.5}}
			if n > 0 {
				cfg.Buffers = benchBuffers(b, n)
			}
			a := New(cfg)
			if _, err := a.RunOnce(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			before := fx.ProcessCPU()
			defer func() { b.ReportMetric((fx.ProcessCPU()-before).Seconds()/float64(b.N), "cpu-s/op") }()
			for range b.N {
				res, err := a.RunOnce(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(*requested) != 0 || res.ScaleUp != nil || res.BufferPods != 8*n {
					b.Fatalf("asked for %v with %d buffer pods; want nothing (the free nodes hold the buffers)", *requested, res.BufferPods)
				}
			}
		})
	}
}

// benchBuffers are n buffers of 8 one-GPU pods.
func benchBuffers(b *testing.B, n int) *buffers.Config {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range n {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cb.CapacityBuffer{
			TypeMeta:   metav1.TypeMeta{APIVersion: cb.Group + "/" + cb.Version, Kind: cb.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("warm-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("warm-uid-%d", i))},
			Spec:       cb.Spec{PodTemplateRef: &cb.LocalObjectRef{Name: "train"}, Limits: v1.ResourceList{"example.com/gpu": resource.MustParse("8")}},
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := idx.Add(&unstructured.Unstructured{Object: u}); err != nil {
			b.Fatal(err)
		}
	}
	tmpl := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := tmpl.Add(gpuPodTemplate("train")); err != nil {
		b.Fatal(err)
	}
	return &buffers.Config{Cluster: view.View{CapacityBuffers: cache.NewGenericLister(idx, cb.GroupVersionResource().GroupResource()),
		PodTemplates: corelisters.NewPodTemplateLister(tmpl)}, Client: buffers.DryRunWriter(), Controller: true, Injection: true}
}
