package liveview

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/view"
)

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
	cluster, err := WithPodGroups(FromInformers(f), f, c.Discovery())
	if err != nil {
		cancel()
		return err
	}
	var others []startable
	batch := map[string]cache.SharedIndexInformer{}
	if cfg != nil {
		if cluster, others, batch, err = batchInformers(cluster, cfg, c.Discovery(), f); err != nil {
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
func readOnChange(ctx context.Context, cluster view.View, changed chan struct{}, quiet time.Duration, fn func(*input.Objects) error) error {
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
