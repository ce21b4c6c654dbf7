package clusterapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	cpclusterapi "draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/clusterapi/infra"
)

// machineRecorder watches a namespace's Machines and remembers every one
// that was ever marked with cluster.x-k8s.io/delete-machine and every
// one that was deleted, whatever happens between two polls.
type machineRecorder struct {
	// start: ScaleDown events before it are another step's.
	start      time.Time
	mu         sync.Mutex
	marked     map[string]bool
	deleted    map[string]bool
	providerID map[string]string // machine -> spec.providerID
}

func recordMachines(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) *machineRecorder {
	t.Helper()
	r := &machineRecorder{start: time.Now().Truncate(time.Second), marked: map[string]bool{}, deleted: map[string]bool{}, providerID: map[string]string{}}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	informer := factory.ForResource(cpclusterapi.GVR(capi.Machine)).Informer()
	see := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := m.GetAnnotations()[capi.DeleteMachineAnnotation]; ok {
			r.marked[m.GetName()] = true
		}
		if gone || m.GetDeletionTimestamp() != nil {
			r.deleted[m.GetName()] = true
		}
		if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" {
			r.providerID[m.GetName()] = id
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { see(obj, false) },
		UpdateFunc: func(_, obj any) { see(obj, false) },
		DeleteFunc: func(obj any) { see(obj, true) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("Machine informer did not sync")
	}
	return r
}

func (r *machineRecorder) sets() (marked, deleted []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for m := range r.marked {
		marked = append(marked, m)
	}
	for m := range r.deleted {
		deleted = append(deleted, m)
	}
	slices.Sort(marked)
	slices.Sort(deleted)
	return marked, deleted
}

// machineOfNode is the Machine whose providerID the node has.
func (r *machineRecorder) machineOfNode(node string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for m, id := range r.providerID {
		if id == infra.ProviderIDPrefix+node {
			return m
		}
	}
	return ""
}

// scaleDownNodes are the nodes draxr-autoscaler reports removing since
// the recorder started: its ScaleDown events on Nodes (CA's reason).
func (r *machineRecorder) scaleDownNodes(ctx context.Context) ([]string, error) {
	evs, err := cp.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"reason": "ScaleDown", "involvedObject.kind": "Node", "source": "draxr-autoscaler"}.AsSelector().String()})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.Type == v1.EventTypeNormal && !ev.LastTimestamp.Time.Before(r.start) && !slices.Contains(out, ev.InvolvedObject.Name) {
			out = append(out, ev.InvolvedObject.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// chosenAreRemoved checks that the Machines removed are exactly those of
// the nodes the autoscaler chose (its ScaleDown events) and those it
// marked with delete-machine, want of them.
func (r *machineRecorder) chosenAreRemoved(ctx context.Context, want int) error {
	nodes, err := r.scaleDownNodes(ctx)
	if err != nil {
		return err
	}
	var chosen []string
	for _, n := range nodes {
		m := r.machineOfNode(n)
		if m == "" {
			return fmt.Errorf("node %s the autoscaler removed has no Machine with its providerID", n)
		}
		chosen = append(chosen, m)
	}
	slices.Sort(chosen)
	marked, deleted := r.sets()
	switch {
	case len(chosen) != want:
		return fmt.Errorf("the autoscaler chose nodes %v (machines %v), want %d", nodes, chosen, want)
	case !slices.Equal(marked, chosen):
		return fmt.Errorf("machines marked %s: %v, the chosen nodes' machines: %v", capi.DeleteMachineAnnotation, marked, chosen)
	case !slices.Equal(deleted, chosen):
		return fmt.Errorf("machines deleted: %v, the chosen nodes' machines: %v", deleted, chosen)
	}
	return nil
}

func (r *machineRecorder) String() string {
	marked, deleted := r.sets()
	return fmt.Sprintf("marked %s, deleted %s", strings.Join(marked, ","), strings.Join(deleted, ","))
}
