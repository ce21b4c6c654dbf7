package clusterapi

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// watched serves the Cluster API kinds the provider lists every loop
// (Machines, MachineDeployments, MachineSets, MachinePools) from watches,
// as CA's provider does from its informers: after the first loop a steady
// loop sends the management cluster no LIST. A kind's watch starts once a
// LIST has found the version its CRD serves; a kind not served is asked
// again after notServedRecheck.
type watched struct {
	dynamic dynamic.Interface
	stop    <-chan struct{}
	now     func() time.Time

	mu    sync.Mutex
	kinds map[watchKey]*watchEntry
	// templates are the infrastructure templates' watches, by resource
	// and namespace, started as groups name them.
	templates map[templateKey]*templateWatch

	// dump, for a dump (DumpSource), holds every object of each kind:
	// the kinds are served from it in any namespace, with no watch.
	dump map[string]cache.Indexer
}

type watchKey struct{ kind, namespace string }

type watchEntry struct {
	informer cache.SharedIndexInformer
	// notServedUntil: the kind's CRD was not served at any version.
	notServedUntil time.Time
}

// notServedRecheck is how long a kind found not served is taken as such
// (MachinePool is optional in Cluster API; installing it later is seen).
const notServedRecheck = 10 * time.Minute

// syncTimeout bounds the wait for a new watch's first list: a watch that
// cannot sync (RBAC without watch, say) fails the loop's Refresh with the
// reason instead of stalling it.
const syncTimeout = time.Minute

func newWatched(d dynamic.Interface, stop <-chan struct{}, now func() time.Time) *watched {
	return &watched{dynamic: d, stop: stop, now: now, kinds: map[watchKey]*watchEntry{}, templates: map[templateKey]*templateWatch{}}
}

type templateKey struct {
	resource  schema.GroupVersionResource
	namespace string
}

type templateWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	// failedUntil: the watch failed (a role with get but not list and
	// watch on the group, as draxr's chart granted before); templates of
	// the resource are read by GET until then.
	failedUntil time.Time
}

// template returns the infrastructure template from its resource's watch
// in the namespace, as CA reads templates from informers: once the watch
// has synced a loop reads no template from the API server. ok is false
// when the watch cannot answer (not synced yet, failed, or the template
// not in it yet): the caller GETs it. The first call for a resource and
// namespace starts the watch. A watch refused (forbidden, or the kind not
// served) is stopped and tried again after notServedRecheck.
func (w *watched) template(gvr schema.GroupVersionResource, ns, name string) (u *unstructured.Unstructured, ok bool) {
	if w.templates == nil { // a dump: its objects are read directly
		return nil, false
	}
	select {
	case <-w.stop: // the provider has stopped: no new watches
		return nil, false
	default:
	}
	key := templateKey{gvr, ns}
	w.mu.Lock()
	defer w.mu.Unlock()
	tw := w.templates[key]
	switch {
	case tw == nil || tw.informer == nil && !w.now().Before(tw.failedUntil):
		w.templates[key] = w.watchTemplates(key)
		return nil, false
	case tw.informer == nil || !tw.informer.HasSynced():
		return nil, false
	}
	obj, exists, err := tw.informer.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	got, isU := obj.(*unstructured.Unstructured)
	return got, isU
}

// watchTemplates starts the watch of key's templates, until the provider
// stops or the watch is refused; w.mu is held.
func (w *watched) watchTemplates(key templateKey) *templateWatch {
	ctx, cancel := context.WithCancel(wait.ContextForChannel(w.stop))
	tw := &templateWatch{cancel: cancel}
	tw.informer = dynamicinformer.NewFilteredDynamicInformer(w.dynamic, key.resource, key.namespace, 0, cache.Indexers{}, nil).Informer()
	// The reflector retries a refused list forever; a role without list
	// and watch is a setting, not a blip: GET instead, and try later.
	_ = tw.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			return
		}
		cancel()
		w.mu.Lock()
		defer w.mu.Unlock()
		tw.informer, tw.failedUntil = nil, w.now().Add(notServedRecheck)
	})
	go tw.informer.RunWithContext(ctx)
	return tw
}

// list returns the kind's objects from its watch, or the dump; ok is
// false when no watch serves the kind yet (the caller lists it and calls
// served or notServed).
func (w *watched) list(ctx context.Context, kind, ns string) (items []unstructured.Unstructured, ok bool, err error) {
	if w.dump != nil {
		idx := w.dump[kind]
		if idx == nil {
			return nil, true, nil // not a kind the dump serves
		}
		if ns == "" {
			return storeItems(idx.List(), kind), true, nil
		}
		objs, err := idx.ByIndex(cache.NamespaceIndex, ns)
		return storeItems(objs, kind), true, err
	}
	w.mu.Lock()
	e := w.kinds[watchKey{kind, ns}]
	w.mu.Unlock()
	switch {
	case e == nil:
		return nil, false, nil
	case e.informer == nil:
		return nil, w.now().Before(e.notServedUntil), nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), e.informer.HasSynced) {
		return nil, true, fmt.Errorf("clusterapi provider: the watch of %ss has not synced within %s (does the autoscaler's role allow watch?)", kind, syncTimeout)
	}
	return storeItems(e.informer.GetStore().List(), kind), true, nil
}

// storeItems are a store's objects of kind as a LIST returns them:
// copies, their kind set, sorted by namespace and name.
func storeItems(objs []any, kind string) []unstructured.Unstructured {
	items := make([]unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			c := u.DeepCopy()
			c.SetKind(kind)
			items = append(items, *c)
		}
	}
	// In the order a LIST returns them.
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetName() < items[j].GetName()
	})
	return items
}

// served starts the watch of the kind at the version a LIST found.
func (w *watched) served(kind, ns string, gvr schema.GroupVersionResource) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.kinds[watchKey{kind, ns}]; e != nil && e.informer != nil {
		return
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(w.dynamic, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	go inf.Run(w.stop)
	w.kinds[watchKey{kind, ns}] = &watchEntry{informer: inf}
}

// notServed remembers that no version of the kind is served.
func (w *watched) notServed(kind, ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kinds[watchKey{kind, ns}] = &watchEntry{notServedUntil: w.now().Add(notServedRecheck)}
}
