package live

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/input"
)

// ListersOf serves objs through listers, as the informers serve a
// cluster, with no API server behind them: code written for the
// autoscaler's caches then reads a dump (draxr simulate --scale-down -f).
// The kinds are those NewListers registers (PodGroups are not served).
// The listers hold objs' objects themselves, as a cache does: never
// modify them.
func ListersOf(objs *input.Objects) (Listers, error) {
	var l Listers
	nodes, err := Indexer("Node", objs.Nodes)
	if err != nil {
		return l, err
	}
	pods, err := Indexer("Pod", append(append([]*v1.Pod(nil), objs.RunningPods...), objs.PendingPods...))
	if err != nil {
		return l, err
	}
	slices, err := Indexer("ResourceSlice", objs.ResourceSlices)
	if err != nil {
		return l, err
	}
	classes, err := Indexer("DeviceClass", objs.DeviceClasses)
	if err != nil {
		return l, err
	}
	claims, err := Indexer("ResourceClaim", objs.ResourceClaims)
	if err != nil {
		return l, err
	}
	templates, err := Indexer("ResourceClaimTemplate", objs.ResourceClaimTemplates)
	if err != nil {
		return l, err
	}
	rules, err := Indexer("DeviceTaintRule", objs.DeviceTaintRules)
	if err != nil {
		return l, err
	}
	daemonSets, err := Indexer("DaemonSet", objs.DaemonSets)
	if err != nil {
		return l, err
	}
	return Listers{
		Nodes: corelisters.NewNodeLister(nodes), Pods: corelisters.NewPodLister(pods),
		Slices: resourcelisters.NewResourceSliceLister(slices), Classes: resourcelisters.NewDeviceClassLister(classes),
		Claims: resourcelisters.NewResourceClaimLister(claims), Templates: resourcelisters.NewResourceClaimTemplateLister(templates),
		TaintRules: resourcelisters.NewDeviceTaintRuleLister(rules),
		DaemonSets: appslisters.NewDaemonSetLister(daemonSets),
	}, nil
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
