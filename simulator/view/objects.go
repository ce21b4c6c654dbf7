package view

import (
	"errors"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
)

// FromObjects serves objs through a View, as the informers serve a
// cluster, with no API server behind them: code written for the
// autoscaler's caches then reads a dump (draxr simulate --scale-down -f).
// Every kind input.Objects holds is served, and PodDisruptionBudgets (a
// dump holds none); PodGroups are not. The listers hold objs' objects
// themselves, as a cache does: never modify them.
func FromObjects(objs *input.Objects) (View, error) {
	var (
		l    View
		errs []error
	)
	index := func(idx cache.Indexer, err error) cache.Indexer {
		errs = append(errs, err)
		return idx
	}
	pods := append(append([]*v1.Pod(nil), objs.RunningPods...), objs.PendingPods...)
	l.Nodes = corelisters.NewNodeLister(index(Indexer("Node", objs.Nodes)))
	l.Pods = corelisters.NewPodLister(index(Indexer("Pod", pods)))
	l.Slices = resourcelisters.NewResourceSliceLister(index(Indexer("ResourceSlice", objs.ResourceSlices)))
	l.Classes = resourcelisters.NewDeviceClassLister(index(Indexer("DeviceClass", objs.DeviceClasses)))
	l.Claims = resourcelisters.NewResourceClaimLister(index(Indexer("ResourceClaim", objs.ResourceClaims)))
	l.Templates = resourcelisters.NewResourceClaimTemplateLister(index(Indexer("ResourceClaimTemplate", objs.ResourceClaimTemplates)))
	l.TaintRules = resourcelisters.NewDeviceTaintRuleLister(index(Indexer("DeviceTaintRule", objs.DeviceTaintRules)))
	l.DaemonSets = appslisters.NewDaemonSetLister(index(Indexer("DaemonSet", objs.DaemonSets)))
	l.PDBs = policylisters.NewPodDisruptionBudgetLister(index(Indexer[*policyv1.PodDisruptionBudget]("PodDisruptionBudget", nil)))
	l.ProvisioningRequests = prlisters.NewProvisioningRequestLister(index(Indexer("ProvisioningRequest", objs.ProvisioningRequests)))
	l.PodTemplates = corelisters.NewPodTemplateLister(index(Indexer("PodTemplate", objs.PodTemplates)))
	l.ResourceQuotas = corelisters.NewResourceQuotaLister(index(Indexer("ResourceQuota", objs.ResourceQuotas)))
	l.Jobs = batchlisters.NewJobLister(index(Indexer("Job", objs.QueuedJobs)))
	l.VolcanoPodGroups = cache.NewGenericLister(index(Indexer("PodGroup.scheduling.volcano.sh", objs.VolcanoPodGroups)),
		VolcanoPodGroupsResource().GroupResource())
	buffers, err := unstructuredBuffers(objs.CapacityBuffers)
	errs = append(errs, err)
	l.CapacityBuffers = cache.NewGenericLister(index(Indexer("CapacityBuffer", buffers)), capacitybuffer.GroupVersionResource().GroupResource())
	if err := errors.Join(errs...); err != nil {
		return View{}, err
	}
	return l, nil
}

// unstructuredBuffers are CapacityBuffers as their informer holds them.
func unstructuredBuffers(bufs []*capacitybuffer.CapacityBuffer) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(bufs))
	for _, b := range bufs {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
		if err != nil {
			return nil, fmt.Errorf("CapacityBuffer %s/%s: %w", b.Namespace, b.Name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(capacitybuffer.GroupVersionResource().GroupVersion().String())
		u.SetKind("CapacityBuffer")
		out = append(out, u)
	}
	return out, nil
}

// Indexer holds objs as an informer's cache holds a kind: by
// namespace/name, with the namespace index its listers use. kind names
// the objects in errors: an object without a name, or two with one name,
// could not both be in an API server.
func Indexer[T metav1.Object](kind string, objs []T) (cache.Indexer, error) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if o.GetName() == "" {
			if o.GetNamespace() != "" {
				return nil, fmt.Errorf("a %s in namespace %s: metadata.name is empty", kind, o.GetNamespace())
			}
			return nil, fmt.Errorf("a %s: metadata.name is empty", kind)
		}
		key, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", kind, o.GetNamespace(), o.GetName(), err)
		}
		if _, dup, _ := idx.GetByKey(key); dup {
			return nil, fmt.Errorf("%s %s: metadata.name: two objects of this name", kind, key)
		}
		if err := idx.Add(o); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, key, err)
		}
	}
	return idx, nil
}
