package view

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	prinformers "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/informers/externalversions"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/features"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
)

// View is every kind of the cluster draxr reads, as listers: the
// planner's (draxr simulate), the autoscaler loop's, its providers' and
// its batch steps'. Every reader takes its listers from one View, built
// from informers (FromInformers and the With methods: the loop,
// --kubeconfig, --watch) or from objects read from files (FromObjects),
// so a dump and a live cluster are read by the same code. A nil lister is
// a kind not read (its API not served, or its step off).
type View struct {
	Nodes     corelisters.NodeLister
	Pods      corelisters.PodLister
	Slices    resourcelisters.ResourceSliceLister
	Classes   resourcelisters.DeviceClassLister
	Claims    resourcelisters.ResourceClaimLister
	Templates resourcelisters.ResourceClaimTemplateLister
	// TaintRules are the DeviceTaintRules (GA in 1.37): the devices they
	// taint are what the scheduler's allocator skips.
	TaintRules resourcelisters.DeviceTaintRuleLister
	// DaemonSets run their pods on every new node they match: a live plan
	// counts that overhead as a dump plan does.
	DaemonSets appslisters.DaemonSetLister
	// PDBs limit what scale-down may evict (a dump holds none).
	PDBs policylisters.PodDisruptionBudgetLister

	// PodGroups make gangs (GenericWorkload): set by WithPodGroups where
	// the API server serves them.
	PodGroups schedulinglisters.PodGroupLister
	// VolcanoPodGroups are Volcano's PodGroups, read unstructured (set
	// where Volcano's scheduler is bypassed and its API served).
	VolcanoPodGroups cache.GenericLister

	// The batch kinds (WithProvisioningRequests, WithCapacityBuffers):
	// CA's ProvisioningRequests, CapacityBuffers (unstructured), the
	// PodTemplates both name, the workloads a buffer's scalableRef names
	// and the ResourceQuotas that cap buffers.
	ProvisioningRequests prlisters.ProvisioningRequestLister
	CapacityBuffers      cache.GenericLister
	PodTemplates         corelisters.PodTemplateLister
	Deployments          appslisters.DeploymentLister
	ReplicaSets          appslisters.ReplicaSetLister
	StatefulSets         appslisters.StatefulSetLister
	Jobs                 batchlisters.JobLister
	ResourceQuotas       corelisters.ResourceQuotaLister
}

// WithPodGroups registers the PodGroup informer with the factory when the
// GenericWorkload gate is on (the scheduler then binds gangs all or
// none), after checking that the API server serves PodGroups: an informer
// on an API that is not served never syncs.
func (v View) WithPodGroups(f informers.SharedInformerFactory, disco discovery.DiscoveryInterface) (View, error) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		return v, nil
	}
	gvr := schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups")
	if !Serves(disco, gvr) {
		return v, fmt.Errorf("GenericWorkload=true: the API server does not serve %s.%s; "+
			"turn the gate on in the API server too (--feature-gates and --runtime-config=%s=true)", gvr.Resource, gvr.GroupVersion(), gvr.GroupVersion())
	}
	v.PodGroups = f.Scheduling().V1beta1().PodGroups().Lister()
	return v, nil
}

// VolcanoPodGroupsResource is the resource of Volcano's PodGroups.
func VolcanoPodGroupsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
}

// Serves reports whether the API server serves gvr.
func Serves(disco discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	return CheckServed(disco, gvr) == nil
}

// CheckServed is nil when the API server serves gvr, else why not: the
// discovery error, or the group version lists no such resource.
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

// FromInformers registers the informers of the kinds every reader needs
// with the factory (built by NewInformerFactory); start the factory and
// wait for its caches afterwards.
func FromInformers(f informers.SharedInformerFactory) View {
	r := f.Resource().V1()
	return View{
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
func (v View) WithVolcanoPodGroups(dyn dynamicinformer.DynamicSharedInformerFactory) View {
	v.VolcanoPodGroups = dyn.ForResource(VolcanoPodGroupsResource()).Lister()
	return v
}

// WithProvisioningRequests registers the informers of CA's
// ProvisioningRequests and of the PodTemplates they name (the caller
// checks that the API is served).
func (v View) WithProvisioningRequests(pr prinformers.SharedInformerFactory, f informers.SharedInformerFactory) View {
	v.ProvisioningRequests = pr.Autoscaling().V1().ProvisioningRequests().Lister()
	v.PodTemplates = f.Core().V1().PodTemplates().Lister()
	return v
}

// WithCapacityBuffers registers the informers of CapacityBuffers (with a
// dynamic factory: CA's types are not in a clientset), of what their
// scalableRef and podTemplateRef name, and of ResourceQuotas (the caller
// checks that the API is served).
func (v View) WithCapacityBuffers(dyn dynamicinformer.DynamicSharedInformerFactory, f informers.SharedInformerFactory) View {
	v.CapacityBuffers = dyn.ForResource(capacitybuffer.GroupVersionResource()).Lister()
	v.PodTemplates = f.Core().V1().PodTemplates().Lister()
	apps := f.Apps().V1()
	v.Deployments, v.ReplicaSets, v.StatefulSets = apps.Deployments().Lister(), apps.ReplicaSets().Lister(), apps.StatefulSets().Lister()
	v.Jobs = f.Batch().V1().Jobs().Lister()
	v.ResourceQuotas = f.Core().V1().ResourceQuotas().Lister()
	return v
}

// Objects builds from the caches what input.LoadPaths builds from a dump of
// the same cluster: bound, unfinished pods are running, unbound ones
// pending (pods being bound run where the scheduler is binding them, as
// in the autoscaler's loop); finished pods are left out. Terminating pods are kept, as in a
// dump: a bound one still holds its node's resources in the scheduler's
// cache until it is gone. Lists are sorted by namespace and name so that
// the plan does not depend on cache order.
func (v View) Objects() (*input.Objects, error) {
	all := labels.Everything()
	objs := &input.Objects{}
	var err error
	if objs.Nodes, err = v.Nodes.List(all); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	pods, err := v.Pods.List(all)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	listed := make(map[string]bool, len(objs.Nodes))
	for _, n := range objs.Nodes {
		listed[n.Name] = true
	}
	for _, p := range pods {
		// Pods being bound are placed on their nodes below, once the
		// claims are read (PlaceBindingPods).
		switch input.SimulateFiling(input.ClassifyPod(p, nil)) {
		case input.Dropped:
		case input.OnItsNode:
			// A pod left on a node that is gone runs nowhere (PodGC
			// deletes it), as the loop's cluster state reads it.
			if listed[p.Spec.NodeName] {
				objs.RunningPods = append(objs.RunningPods, p)
			}
		default:
			objs.PendingPods = append(objs.PendingPods, p)
		}
	}
	if objs.ResourceSlices, err = v.Slices.List(all); err != nil {
		return nil, fmt.Errorf("list resourceslices: %w", err)
	}
	if objs.DeviceClasses, err = v.Classes.List(all); err != nil {
		return nil, fmt.Errorf("list deviceclasses: %w", err)
	}
	if objs.ResourceClaims, err = v.Claims.List(all); err != nil {
		return nil, fmt.Errorf("list resourceclaims: %w", err)
	}
	if objs.ResourceClaimTemplates, err = v.Templates.List(all); err != nil {
		return nil, fmt.Errorf("list resourceclaimtemplates: %w", err)
	}
	if objs.DeviceTaintRules, err = v.TaintRules.List(all); err != nil {
		return nil, fmt.Errorf("list devicetaintrules: %w", err)
	}
	if v.DaemonSets != nil {
		if objs.DaemonSets, err = v.DaemonSets.List(all); err != nil {
			return nil, fmt.Errorf("list daemonsets: %w", err)
		}
	}
	if err := v.AddGangs(objs); err != nil {
		return nil, err
	}
	if err := v.addBatch(objs); err != nil {
		return nil, err
	}
	sortByKey(objs.Nodes)
	sortByKey(objs.DaemonSets)
	sortByKey(objs.RunningPods)
	sortByKey(objs.PendingPods)
	sortByKey(objs.ResourceSlices)
	sortByKey(objs.DeviceClasses)
	sortByKey(objs.ResourceClaims)
	sortByKey(objs.ResourceClaimTemplates)
	sortByKey(objs.DeviceTaintRules)
	objs.PlaceBindingPods()
	return objs, nil
}

// AddGangs adds the PodGroups and Volcano's PodGroups the listers hold,
// sorted.
func (v View) AddGangs(objs *input.Objects) error {
	all := labels.Everything()
	if v.PodGroups != nil {
		groups, err := v.PodGroups.List(all)
		if err != nil {
			return fmt.Errorf("list podgroups: %w", err)
		}
		objs.PodGroups = groups
		sortByKey(objs.PodGroups)
	}
	if v.VolcanoPodGroups != nil {
		groups, err := v.VolcanoPodGroups.List(all)
		if err != nil {
			return fmt.Errorf("list %s: %w", VolcanoPodGroupsResource().GroupResource(), err)
		}
		objs.VolcanoPodGroups = nil
		for _, g := range groups {
			if u, ok := g.(*unstructured.Unstructured); ok {
				objs.VolcanoPodGroups = append(objs.VolcanoPodGroups, u)
			}
		}
		sortByKey(objs.VolcanoPodGroups)
	}
	return nil
}

type namespacedName interface {
	GetNamespace() string
	GetName() string
}

func sortByKey[T namespacedName](list []T) {
	sort.Slice(list, func(i, j int) bool {
		if a, b := list[i].GetNamespace(), list[j].GetNamespace(); a != b {
			return a < b
		}
		return list[i].GetName() < list[j].GetName()
	})
}

// Read starts informers on c (the reflectors list, in pages where the
// server pages, then watch), waits until every cache has synced, and
// returns one snapshot of the cluster. With cfg (c's configuration), the
// CRDs the server serves are read too: Volcano's PodGroups, CA's
// ProvisioningRequests and CapacityBuffers, and the PodTemplates and
// ResourceQuotas they read. Nothing is written to the cluster.
func Read(ctx context.Context, c kubernetes.Interface, cfg *rest.Config) (*input.Objects, error) {
	var objs *input.Objects
	done := errors.New("read once")
	err := Watch(ctx, c, cfg, 0, 0, func(o *input.Objects) error {
		objs = o
		return done
	})
	if err != done {
		return nil, err
	}
	return objs, nil
}

// Watch reads the cluster as Read does and calls fn with the first
// snapshot, then with a new one after every change once no further change
// has come for quiet (node heartbeats and status updates arrive all the
// time; fn sees them in batches). syncTimeout, when not 0, bounds the
// first read. Watch returns nil when ctx ends, or fn's first error.
func Watch(ctx context.Context, c kubernetes.Interface, cfg *rest.Config, syncTimeout, quiet time.Duration, fn func(*input.Objects) error) error {
	ctx, cancel := context.WithCancel(ctx)
	f := NewInformerFactory(c)
	cluster, err := FromInformers(f).WithPodGroups(f, c.Discovery())
	if err != nil {
		cancel()
		return err
	}
	var others []startable
	batch := map[string]cache.SharedIndexInformer{}
	if cfg != nil {
		if cluster, others, batch, err = cluster.batchInformers(cfg, c.Discovery(), f); err != nil {
			cancel()
			return err
		}
	}
	changed := make(chan struct{}, 1)
	listErrs := &listErrors{last: map[string]error{}}
	if err := watchChanges(f, batch, changed, listErrs); err != nil {
		cancel()
		return err
	}
	f.Start(ctx.Done())
	for _, o := range others {
		o.start(ctx.Done())
	}
	defer func() {
		cancel() // stops the informers; Shutdown waits for them
		f.Shutdown()
	}()
	if err := waitSynced(ctx, f, others, syncTimeout, listErrs); err != nil {
		return err
	}
	return readOnChange(ctx, cluster, changed, quiet, fn)
}

// listErrors keeps each informer's last list or watch error: a reflector
// retries a failed list forever, so a timeout says why (forbidden,
// unreachable) only from these.
type listErrors struct {
	mu   sync.Mutex
	last map[string]error
}

func (e *listErrors) set(typ string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last[typ] = err
}

// why is the errors by type, or else the sync's own end (ctxErr).
func (e *listErrors) why(ctxErr error) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var why []string
	for typ, err := range e.last {
		why = append(why, fmt.Sprintf("%s: %v", typ, err))
	}
	sort.Strings(why)
	if len(why) == 0 {
		why = append(why, ctxErr.Error())
	}
	return strings.Join(why, "; ")
}

// watchChanges signals changed on every change to the read objects (a
// signal already pending stands for the new one), and keeps their list
// errors in listErrs.
func watchChanges(f informers.SharedInformerFactory, batch map[string]cache.SharedIndexInformer, changed chan struct{}, listErrs *listErrors) error {
	notify := func() {
		select {
		case changed <- struct{}{}:
		default: // a change is already pending
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	watched := map[string]cache.SharedIndexInformer{
		"nodes": f.Core().V1().Nodes().Informer(), "pods": f.Core().V1().Pods().Informer(),
		"resourceslices": f.Resource().V1().ResourceSlices().Informer(), "deviceclasses": f.Resource().V1().DeviceClasses().Informer(),
		"resourceclaims": f.Resource().V1().ResourceClaims().Informer(), "resourceclaimtemplates": f.Resource().V1().ResourceClaimTemplates().Informer(),
		"devicetaintrules": f.Resource().V1().DeviceTaintRules().Informer(),
	}
	maps.Copy(watched, batch)
	for typ, inf := range watched {
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			listErrs.set(typ, err)
		})
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watching %s: %w", typ, err)
		}
	}
	return nil
}

// waitSynced waits for the first read of every informer, for at most
// syncTimeout when not 0.
func waitSynced(ctx context.Context, f informers.SharedInformerFactory, others []startable, syncTimeout time.Duration, listErrs *listErrors) error {
	syncCtx := ctx
	if syncTimeout > 0 {
		var cancelSync context.CancelFunc
		syncCtx, cancelSync = context.WithTimeout(ctx, syncTimeout)
		defer cancelSync()
	}
	synced := allSynced(f.WaitForCacheSync(syncCtx.Done()))
	for _, o := range others {
		synced = synced && o.sync(syncCtx.Done())
	}
	if !synced {
		return fmt.Errorf("reading the cluster did not complete: %s", listErrs.why(syncCtx.Err()))
	}
	return nil
}

// readOnChange calls fn with a snapshot of cluster now, and again each
// time changes have settled, until ctx ends or fn fails.
func readOnChange(ctx context.Context, cluster View, changed chan struct{}, quiet time.Duration, fn func(*input.Objects) error) error {
	for {
		// Drop the notifications of the initial list: this read has them.
		select {
		case <-changed:
		default:
		}
		objs, err := cluster.Objects()
		if err != nil {
			return err
		}
		if err := fn(objs); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		if !settle(ctx, changed, quiet) {
			return nil
		}
	}
}

// settle waits until no change has come for quiet; false when ctx ended.
func settle(ctx context.Context, changed <-chan struct{}, quiet time.Duration) bool {
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			timer.Reset(quiet)
		case <-timer.C:
			return true
		}
	}
}

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
