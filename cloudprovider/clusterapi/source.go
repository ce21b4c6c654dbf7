package clusterapi

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/simulator/view"
)

// Source is what the provider reads: the API server (Dynamic, Kube and
// Mapper), or a dump (Dump).
type Source struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	Mapper  meta.RESTMapper
	Dump    *Dump
}

// Dump is a dump's objects as the provider reads them from the API
// server, held in indexers as its watches and the autoscaler's informers
// hold them: no client is involved, and the provider over a dump writes
// nothing (draxr simulate plans, or explains in dry run).
type Dump struct {
	// kinds hold the Cluster API kinds the provider lists, by kind.
	kinds map[string]cache.Indexer
	// infra are the infrastructure objects (machine templates).
	infra      map[infraKey]*unstructured.Unstructured
	configMaps corelisters.ConfigMapLister
	nodes      corelisters.NodeLister
	slices     resourcelisters.ResourceSliceLister
}

type infraKey struct{ group, kind, namespace, name string }

// DumpSource serves a dump's objects to the provider as the API server
// would: its Cluster API objects (v1beta1 ones converted to v1beta2, as
// the API server serves them), infrastructure objects by their kind, and
// its Nodes, ResourceSlices and ConfigMaps. The provider then runs over a
// dump as over a cluster. Objects an API server could not hold together
// (two of one name) are an error naming them.
func DumpSource(objs *input.Objects) (Source, error) {
	d := &Dump{kinds: map[string]cache.Indexer{}, infra: map[infraKey]*unstructured.Unstructured{}}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, u := range objs.ClusterAPI {
		gvk := u.GroupVersionKind()
		if gvk.Group != capi.Group {
			key := infraKey{gvk.Group, gvk.Kind, u.GetNamespace(), u.GetName()}
			if _, dup := d.infra[key]; dup {
				return Source{}, fmt.Errorf("%s %s/%s: metadata.name: two objects of this name", gvk.Kind, u.GetNamespace(), u.GetName())
			}
			d.infra[key] = u
			continue
		}
		c := u.DeepCopy()
		c.SetAPIVersion(capi.APIVersion)
		byKind[gvk.Kind] = append(byKind[gvk.Kind], c)
	}
	for _, kind := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool, capi.Machine} {
		idx, err := view.Indexer(kind, byKind[kind])
		if err != nil {
			return Source{}, err
		}
		d.kinds[kind] = idx
	}
	nodes, err := view.Indexer("Node", objs.Nodes)
	if err != nil {
		return Source{}, err
	}
	slices, err := view.Indexer("ResourceSlice", objs.ResourceSlices)
	if err != nil {
		return Source{}, err
	}
	configMaps, err := view.Indexer("ConfigMap", objs.ConfigMaps)
	if err != nil {
		return Source{}, err
	}
	d.nodes, d.slices = corelisters.NewNodeLister(nodes), resourcelisters.NewResourceSliceLister(slices)
	d.configMaps = corelisters.NewConfigMapLister(configMaps)
	return Source{Dump: d}, nil
}

// configMap is the dump's ConfigMap ns/name, or the API server's error
// for one it does not hold.
func (d *Dump) configMap(ns, name string) (*v1.ConfigMap, error) {
	cm, err := d.configMaps.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Worded as the API server words it (the lister says "configmap").
		return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
	}
	return cm, err
}

// infraObject is the dump's infrastructure object of the kind, at any
// version, as the provider reads it at the version served.
func (d *Dump) infraObject(gk schema.GroupKind, ns, name string) (*unstructured.Unstructured, error) {
	if u, ok := d.infra[infraKey{gk.Group, gk.Kind, ns, name}]; ok {
		return u, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, name)
}
