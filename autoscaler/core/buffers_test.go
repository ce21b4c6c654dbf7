package core

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/autoscaler/buffers"
	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/view"
	"draxr.dev/draxr/test/fakeprovider"
)

// bufferWrites records the status writes.
type bufferWrites struct {
	mu   sync.Mutex
	last map[string]*cb.CapacityBuffer
}

func (w *bufferWrites) UpdateStatus(_ context.Context, b *cb.CapacityBuffer) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[b.Key()] = b.DeepCopy()
	return nil
}

// A buffer of 16 GPUs (its pods ask one each) on an empty group of 8-GPU
// nodes: 2 nodes, the event on the buffer and none on its pods; once the
// nodes are up, they are in use (the buffer's room), not unneeded.
func TestBufferScalesUpAndKeepsItsNodes(t *testing.T) {
	e := newFailureEnv(t)
	e.a.cfg.ScaleDown.UnneededTime = 0
	group := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cb.CapacityBuffer{
		TypeMeta:   metav1.TypeMeta{APIVersion: cb.Group + "/" + cb.Version, Kind: cb.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "default", UID: "warm-uid"},
		Spec:       cb.Spec{PodTemplateRef: &cb.LocalObjectRef{Name: "train"}, Limits: v1.ResourceList{"example.com/gpu": resource.MustParse("16")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := idx.Add(&unstructured.Unstructured{Object: spec}); err != nil {
		t.Fatal(err)
	}
	writes := &bufferWrites{last: map[string]*cb.CapacityBuffer{}}
	e.a.cfg.Buffers = &buffers.Config{Cluster: view.View{CapacityBuffers: cache.NewGenericLister(idx, cb.GroupVersionResource().GroupResource()),
		PodTemplates: corelisters.NewPodTemplateLister(templateIndexer(t, gpuPodTemplate("train")))}, Client: writes,
		Controller: true, Injection: true}
	res, err := e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := group.Increases(); len(got) != 1 || got[0] != 2 || res.ScaleUp == nil {
		t.Fatalf("increases %v, want one of 2 for the buffer", got)
	}
	b := writes.last["default/warm"]
	if b == nil || *b.Status.Replicas != 16 || !meta.IsStatusConditionTrue(b.Status.Conditions, cb.ReadyForProvisioning) ||
		meta.FindStatusCondition(b.Status.Conditions, cb.Provisioning).Reason != cb.ReasonFakePodsInjected {
		t.Fatalf("buffer status %+v", b)
	}
	evs := e.events(EventTriggeredScaleUp)
	if len(evs) != 1 || !strings.Contains(evs[0], "capacity buffer 16 fake pods triggered scale-up") {
		t.Errorf("events %v, want one on the buffer", evs)
	}
	e.at(time.Hour)
	res, err = e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ScaleUp != nil || len(res.Unneeded) != 0 || len(group.Names()) != 2 {
		t.Errorf("with the nodes up: scale-up %+v, unneeded %v, %d nodes; want none, none, 2", res.ScaleUp, res.Unneeded, len(group.Names()))
	}
}
