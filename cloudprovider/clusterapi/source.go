package clusterapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Source is what the provider reads: the API server, or a dump.
type Source struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	Mapper  meta.RESTMapper
}

// DumpSource serves a dump's objects to the provider as the API server
// would: its Cluster API objects (v1beta1 ones converted to v1beta2, as
// the API server serves them), infrastructure objects by their kind, and
// its Nodes, ResourceSlices and ConfigMaps. The provider then runs over a
// dump exactly as over a cluster; what it would write stays in memory.
func DumpSource(objs *input.Objects) (Source, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	listKinds := map[schema.GroupVersionResource]string{}
	for _, kind := range []string{capi.MachineDeployment, capi.MachineSet, capi.MachinePool, capi.Machine} {
		listKinds[GVR(kind)] = kind + "List"
	}
	var dyn []runtime.Object
	for _, u := range objs.ClusterAPI {
		c := u.DeepCopy()
		gvk := c.GroupVersionKind()
		if gvk.Group == capi.Group {
			c.SetAPIVersion(capi.APIVersion)
		} else {
			mapper.Add(gvk, meta.RESTScopeNamespace)
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			listKinds[plural] = gvk.Kind + "List"
		}
		dyn = append(dyn, c)
	}
	var kube []runtime.Object
	for _, n := range objs.Nodes {
		kube = append(kube, n)
	}
	for _, s := range objs.ResourceSlices {
		kube = append(kube, s)
	}
	for _, c := range objs.ConfigMaps {
		kube = append(kube, c)
	}
	var src Source
	err := catchPanic(func() {
		src.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, dyn...)
		src.Kube = kubefake.NewClientset(kube...)
	})
	src.Mapper = mapper
	return src, err
}

// catchPanic turns the fake clients' panic on an object they cannot hold
// into an error: input already refused duplicates, so this is a bug, but
// a bad dump must never crash the planner.
func catchPanic(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the dump as the API server would: %v", r)
		}
	}()
	fn()
	return nil
}
