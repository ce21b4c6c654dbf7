package liveview

import (
	"fmt"
	"slices"

	prinformers "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/informers/externalversions"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/features"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/view"
)

// NewInformerFactory is the informer factory every reader of a live
// cluster starts (the autoscaler's loop, draxr simulate --kubeconfig):
// objects are cached as trimForPlanning leaves them. At 50,000 pods what
// it drops is a large part of the heap.
func NewInformerFactory(c kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTransform(trimForPlanning))
}

// trimForPlanning drops what no reader of the cache uses: managedFields on
// every object, as kube-scheduler's pod cache does, and on pods the
// volumes only the kubelet reads (service-account token projections,
// ConfigMaps, Secrets, the downward API). No scheduler plugin and none of
// CA's drain rules look at those, and nearly every pod carries one. The
// cache is only read: nothing writes a cached object back.
func trimForPlanning(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	if pod, ok := obj.(*v1.Pod); ok {
		pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, kubeletOnly)
	}
	return obj, nil
}

func kubeletOnly(v v1.Volume) bool {
	return v.Projected != nil || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil
}

// FromInformers registers the informers of the kinds every reader needs
// with the factory (built by NewInformerFactory); start the factory and
// wait for its caches afterwards.
func FromInformers(f informers.SharedInformerFactory) view.View {
	r := f.Resource().V1()
	return view.View{
		Nodes: f.Core().V1().Nodes().Lister(), Pods: f.Core().V1().Pods().Lister(),
		Slices: r.ResourceSlices().Lister(), Classes: r.DeviceClasses().Lister(),
		Claims: r.ResourceClaims().Lister(), Templates: r.ResourceClaimTemplates().Lister(),
		TaintRules: r.DeviceTaintRules().Lister(),
		DaemonSets: f.Apps().V1().DaemonSets().Lister(),
		PDBs:       f.Policy().V1().PodDisruptionBudgets().Lister(),
	}
}

// WithVolcanoPodGroups registers the informer of Volcano's PodGroups with
// a dynamic factory (the caller checks that the API is served).
func WithVolcanoPodGroups(v view.View, dyn dynamicinformer.DynamicSharedInformerFactory) view.View {
	v.VolcanoPodGroups = dyn.ForResource(view.VolcanoPodGroupsResource()).Lister()
	return v
}

// WithProvisioningRequests registers the informers of CA's
// ProvisioningRequests and of the PodTemplates they name (the caller
// checks that the API is served).
func WithProvisioningRequests(v view.View, pr prinformers.SharedInformerFactory, f informers.SharedInformerFactory) view.View {
	v.ProvisioningRequests = pr.Autoscaling().V1().ProvisioningRequests().Lister()
	v.PodTemplates = f.Core().V1().PodTemplates().Lister()
	return v
}

// WithCapacityBuffers registers the informers of CapacityBuffers (with a
// dynamic factory: CA's types are not in a clientset), of what their
// scalableRef and podTemplateRef name, and of ResourceQuotas (the caller
// checks that the API is served).
func WithCapacityBuffers(v view.View, dyn dynamicinformer.DynamicSharedInformerFactory, f informers.SharedInformerFactory) view.View {
	v.CapacityBuffers = dyn.ForResource(capacitybuffer.GroupVersionResource()).Lister()
	v.PodTemplates = f.Core().V1().PodTemplates().Lister()
	apps := f.Apps().V1()
	v.Deployments, v.ReplicaSets, v.StatefulSets = apps.Deployments().Lister(), apps.ReplicaSets().Lister(), apps.StatefulSets().Lister()
	v.Jobs = f.Batch().V1().Jobs().Lister()
	v.ResourceQuotas = f.Core().V1().ResourceQuotas().Lister()
	return v
}

// WithPodGroups registers the PodGroup informer with the factory when the
// GenericWorkload gate is on (the scheduler then binds gangs all or
// none), after checking that the API server serves PodGroups: an informer
// on an API that is not served never syncs.
func WithPodGroups(v view.View, f informers.SharedInformerFactory, disco discovery.DiscoveryInterface) (view.View, error) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		return v, nil
	}
	gvr := schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups")
	if CheckServed(disco, gvr) != nil {
		return v, fmt.Errorf("GenericWorkload=true: the API server does not serve %s.%s; "+
			"turn the gate on in the API server too (--feature-gates and --runtime-config=%s=true)", gvr.Resource, gvr.GroupVersion(), gvr.GroupVersion())
	}
	v.PodGroups = f.Scheduling().V1beta1().PodGroups().Lister()
	return v, nil
}

// CheckServed is nil when the API server serves gvr, else why not: the
// discovery error, or the group version lists no such resource. It is
// draxr's one "is this API served" check (an informer on an API not
// served never syncs): callers that need only yes or no compare with nil.
func CheckServed(disco discovery.DiscoveryInterface, gvr schema.GroupVersionResource) error {
	resources, err := disco.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return err
	}
	if resources == nil || !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }) {
		return fmt.Errorf("%s lists no %s", gvr.GroupVersion(), gvr.Resource)
	}
	return nil
}

// JSONOnly is cfg for APIs served in JSON only, as CRDs are: the
// clientset's content type may be protobuf (--kube-api-content-type).
func JSONOnly(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType, out.AcceptContentTypes = "application/json", "application/json"
	return out
}
