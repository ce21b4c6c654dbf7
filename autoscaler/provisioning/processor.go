// Package provisioning is draxr-autoscaler's ProvisioningRequest
// processor (--enable-provisioning-requests): each loop it reads the
// requests, applies CA's timers, books provisioned capacity, picks the
// requests to decide (one, or a check-capacity batch) and writes their
// conditions (Start, then Serve as the loop's step). The decisions
// themselves are simulator/provreq's; the loop (autoscaler/core) runs the
// step and executes the atomic scale-up it asks for (loopstep.Loop).
// draxr simulate runs the same step over a dump (OfflineStep).
package provisioning

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/simulator/provreq"
)

// Config are CA's --provisioning-request-* and --check-capacity-* flags
// and what the processor reads and writes through.
type Config struct {
	Requests  prlisters.ProvisioningRequestLister
	Templates corelisters.PodTemplateLister
	Client    Client
	// InitialBackoff doubles per retry up to MaxBackoff; BackoffCacheSize
	// bounds the requests whose backoff is remembered (the oldest go).
	InitialBackoff, MaxBackoff time.Duration
	BackoffCacheSize           int
	// BatchProcessing decides up to MaxBatchSize check-capacity requests
	// a loop, within BatchTimebox; otherwise one request a loop.
	BatchProcessing bool
	MaxBatchSize    int
	BatchTimebox    time.Duration
	// ProcessorInstance is --check-capacity-processor-instance.
	ProcessorInstance string
}

// CA's defaults.
const (
	DefaultInitialBackoff   = time.Minute
	DefaultMaxBackoff       = 10 * time.Minute
	DefaultBackoffCacheSize = 1000
	DefaultMaxBatchSize     = 10
	DefaultBatchTimebox     = 10 * time.Second
)

// Client reads one request fresh, writes requests' status and deletes
// finished ones.
type Client interface {
	Get(ctx context.Context, namespace, name string) (*prv1.ProvisioningRequest, error)
	UpdateStatus(ctx context.Context, pr *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error)
	Delete(ctx context.Context, namespace, name string) error
}

// NewClient is Client over CA's clientset.
func NewClient(c prclient.Interface) Client { return clientsetWriter{c} }

type clientsetWriter struct{ c prclient.Interface }

func (w clientsetWriter) UpdateStatus(ctx context.Context, pr *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error) {
	return w.c.AutoscalingV1().ProvisioningRequests(pr.Namespace).UpdateStatus(ctx, pr, metav1.UpdateOptions{FieldManager: "draxr-autoscaler"})
}

func (w clientsetWriter) Get(ctx context.Context, namespace, name string) (*prv1.ProvisioningRequest, error) {
	return w.c.AutoscalingV1().ProvisioningRequests(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (w clientsetWriter) Delete(ctx context.Context, namespace, name string) error {
	return w.c.AutoscalingV1().ProvisioningRequests(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// DryRunClient reads through c and writes nothing: a dry run (shadow
// mode) decides requests and keeps what it would have written in memory.
func DryRunClient(c Client) Client { return dryRunClient{c} }

type dryRunClient struct{ Client }

func (dryRunClient) UpdateStatus(_ context.Context, pr *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error) {
	return pr.DeepCopy(), nil
}

func (dryRunClient) Delete(context.Context, string, string) error { return nil }

// Processor keeps, between loops, each request's backoff and the status
// it last wrote (so a lagging cache never has a request decided twice).
type Processor struct {
	cfg     Config
	serving provreq.Serving

	mu      sync.Mutex
	backoff *backoffCache
	// written is, by UID, the request as last written and the resource
	// versions before it: while the cache still shows one of those, the
	// written copy is the truth.
	written map[types.UID]writtenRequest
}

type writtenRequest struct {
	before []string
	pr     *prv1.ProvisioningRequest
	// unsaved: the write failed; the next loop writes it again.
	unsaved bool
}

// New returns a processor; zero values take CA's defaults.
func New(cfg Config) *Processor {
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = DefaultInitialBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.BackoffCacheSize <= 0 {
		cfg.BackoffCacheSize = DefaultBackoffCacheSize
	}
	if cfg.MaxBatchSize <= 0 {
		cfg.MaxBatchSize = DefaultMaxBatchSize
	}
	if cfg.BatchTimebox <= 0 {
		cfg.BatchTimebox = DefaultBatchTimebox
	}
	return &Processor{cfg: cfg, serving: provreq.Serving{ProcessorInstance: cfg.ProcessorInstance},
		backoff: newBackoffCache(cfg.BackoffCacheSize), written: map[types.UID]writtenRequest{}}
}

// Templates finds PodTemplates in the informer cache.
func (p *Processor) Templates(namespace, name string) *v1.PodTemplate {
	t, err := p.cfg.Templates.PodTemplates(namespace).Get(name)
	if err != nil {
		return nil
	}
	return t
}

// Loop is one loop's view of the requests this autoscaler serves.
type Loop struct {
	p   *Processor
	now time.Time
	// Served are the requests served, oldest first, with this loop's
	// timer changes applied.
	Served []*prv1.ProvisioningRequest
	// Consumers are, per request (namespace/name), its real pods that are
	// scheduled.
	Consumers map[string][]*v1.Pod
	// Changed are the requests whose status this loop changed, by key,
	// with what changed, for the status ConfigMap and events.
	Changed map[string]provreq.Condition
	// Deleted lists the finished requests deleted this loop.
	Deleted []string
	// Reports are the requests decided this loop, for the loop's result.
	Reports []provreq.Report
	Errors  []error
}

// Start reads the requests at now, applies CA's timers (booking expiry or
// consumption, 7-day expiry) and deletes finished ones older than 7 days.
// running are the loop's bound pods (consumers are found among them).
func (p *Processor) Start(ctx context.Context, running []*v1.Pod, now time.Time) (*Loop, error) {
	all, err := p.cfg.Requests.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ProvisioningRequests: %w", err)
	}
	l := &Loop{p: p, now: now, Consumers: provreq.Consumers(running), Changed: map[string]provreq.Condition{}}
	p.mu.Lock()
	var unsaved []*prv1.ProvisioningRequest
	for i, pr := range all {
		all[i] = p.current(pr)
		if w, ok := p.written[pr.UID]; ok && w.unsaved {
			unsaved = append(unsaved, w.pr)
		}
	}
	p.mu.Unlock()
	for _, pr := range unsaved {
		l.save(ctx, pr, "retry")
	}
	provreq.Order(all)
	for _, pr := range all {
		if !p.serving.Decides(pr) {
			continue
		}
		if provreq.ShouldDelete(pr, now) {
			if err := p.cfg.Client.Delete(ctx, pr.Namespace, pr.Name); err != nil && !apierrors.IsNotFound(err) {
				l.Errors = append(l.Errors, fmt.Errorf("delete finished ProvisioningRequest %s: %w", provreq.Key(pr), err))
			} else {
				l.Deleted = append(l.Deleted, provreq.Key(pr))
			}
			continue
		}
		if c := provreq.Lifecycle(pr, len(l.Consumers[provreq.Key(pr)]), now); c != nil {
			pr = l.write(ctx, pr, *c)
		}
		l.Served = append(l.Served, pr)
	}
	return l, nil
}

// current is the request as the processor knows it: its own last write
// while the cache still holds the version before it. p.mu is held.
func (p *Processor) current(pr *prv1.ProvisioningRequest) *prv1.ProvisioningRequest {
	w, ok := p.written[pr.UID]
	if !ok {
		return pr
	}
	if slices.Contains(w.before, pr.ResourceVersion) {
		return w.pr
	}
	delete(p.written, pr.UID)
	return pr
}

// write sets c on pr and writes the status. On failure the change is
// still the processor's truth (a decision is never made twice because a
// write failed) and the next loops write it again.
func (l *Loop) write(ctx context.Context, pr *prv1.ProvisioningRequest, c provreq.Condition) *prv1.ProvisioningRequest {
	out := pr.DeepCopy()
	provreq.Set(out, c, l.now)
	l.Changed[provreq.Key(pr)] = c
	return l.save(ctx, out, fmt.Sprintf("write %s=%s (%s)", c.Type, c.Status, c.Reason))
}

// save writes pr's status and remembers it as written, or as unsaved. A
// conflict means the request changed meanwhile: what was to be saved is
// dropped and the next loop reads it afresh.
func (l *Loop) save(ctx context.Context, pr *prv1.ProvisioningRequest, what string) *prv1.ProvisioningRequest {
	updated, err := l.p.cfg.Client.UpdateStatus(ctx, pr)
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	before := []string{pr.ResourceVersion}
	if w, ok := l.p.written[pr.UID]; ok && w.pr.ResourceVersion == pr.ResourceVersion {
		// Written on top of an earlier write the cache may not show yet.
		before = append(w.before, before...)
	}
	if err != nil {
		l.Errors = append(l.Errors, fmt.Errorf("ProvisioningRequest %s: %s: %w", provreq.Key(pr), what, err))
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			delete(l.p.written, pr.UID)
		} else {
			l.p.written[pr.UID] = writtenRequest{before: before, pr: pr, unsaved: true}
		}
		return pr
	}
	l.p.written[pr.UID] = writtenRequest{before: before, pr: updated}
	return updated
}

// Booked are the served requests whose capacity is held this loop.
func (l *Loop) Booked() []*prv1.ProvisioningRequest {
	var out []*prv1.ProvisioningRequest
	for _, pr := range l.Served {
		if provreq.Books(pr) {
			out = append(out, pr)
		}
	}
	return out
}

// ToDecide are the requests to decide this loop, in order: the first
// available one (an atomic request, or a check-capacity one), or with
// batch processing up to the batch size of check-capacity requests (an
// atomic request first in line is decided alone). A request is available
// when it is neither finished nor provisioned, and a retried one only once
// its backoff since the last CapacityIsNotFound has passed.
func (l *Loop) ToDecide() []*prv1.ProvisioningRequest {
	var out []*prv1.ProvisioningRequest
	for _, pr := range l.Served {
		if !l.available(pr) {
			continue
		}
		if pr.Spec.ProvisioningClassName == provreq.BestEffortAtomic {
			if len(out) == 0 {
				return []*prv1.ProvisioningRequest{pr}
			}
			continue
		}
		out = append(out, pr)
		if !l.p.cfg.BatchProcessing || len(out) >= l.p.cfg.MaxBatchSize {
			break
		}
	}
	return out
}

func (l *Loop) available(pr *prv1.ProvisioningRequest) bool {
	l.p.mu.Lock()
	wait := l.p.backoff.get(pr.UID, l.p.cfg.InitialBackoff)
	l.p.mu.Unlock()
	return provreq.Available(pr, wait, l.now)
}

// Timebox is how long a loop may spend deciding a batch.
func (l *Loop) Timebox() time.Duration { return l.p.cfg.BatchTimebox }

// Accept takes pr up: it is read again from the API server (a cache
// behind a write of this or another replica must not have it decided
// twice) and marked Accepted, as CA does. nil means it is not to be
// decided now (gone, or decided meanwhile).
func (l *Loop) Accept(ctx context.Context, pr *prv1.ProvisioningRequest) *prv1.ProvisioningRequest {
	fresh, err := l.p.cfg.Client.Get(ctx, pr.Namespace, pr.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		l.Errors = append(l.Errors, fmt.Errorf("read ProvisioningRequest %s: %w", provreq.Key(pr), err))
		return nil
	case fresh.UID != pr.UID || !l.available(fresh):
		return nil
	}
	if provreq.IsTrue(fresh, prv1.Accepted) {
		return fresh
	}
	return l.write(ctx, fresh, provreq.Condition{Type: prv1.Accepted, Status: metav1.ConditionTrue, Reason: provreq.ReasonAccepted,
		Message: provreq.AcceptedMessage})
}

// Record writes a decision's condition and keeps the backoff: a request
// not provisioned waits twice as long as last time before its next try.
func (l *Loop) Record(ctx context.Context, d provreq.Decision) *prv1.ProvisioningRequest {
	l.p.mu.Lock()
	if d.Condition.Type == prv1.Provisioned && d.Condition.Status == metav1.ConditionFalse {
		l.p.backoff.grow(d.Request.UID, l.p.cfg.InitialBackoff, l.p.cfg.MaxBackoff)
	} else {
		l.p.backoff.remove(d.Request.UID)
	}
	l.p.mu.Unlock()
	// The condition and the domain's detail in one status write: Kueue
	// reads the details only when Provisioned turns true.
	out := d.Request.DeepCopy()
	provreq.Apply(out, d, l.now)
	l.Changed[provreq.Key(out)] = d.Condition
	pr := l.save(ctx, out, fmt.Sprintf("write %s=%s (%s)", d.Condition.Type, d.Condition.Status, d.Condition.Reason))
	for i := range l.Served {
		if l.Served[i].UID == pr.UID {
			l.Served[i] = pr
		}
	}
	return pr
}

// Err joins the loop's write errors.
func (l *Loop) Err() error { return errors.Join(l.Errors...) }

// Log reports the loop's changes.
func (l *Loop) Log(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for key, c := range l.Changed {
		logger.V(2).Info("ProvisioningRequest condition", "request", key, "type", c.Type, "status", c.Status, "reason", c.Reason, "message", c.Message)
	}
	for _, key := range l.Deleted {
		logger.V(2).Info("Deleted finished ProvisioningRequest", "request", key)
	}
}

// backoffCache keeps each request's next backoff, the oldest entries
// dropped past its size (CA's LRU).
type backoffCache struct {
	size  int
	order *list.List
	items map[types.UID]*list.Element
}

type backoffEntry struct {
	uid  types.UID
	wait time.Duration
}

func newBackoffCache(size int) *backoffCache {
	return &backoffCache{size: size, order: list.New(), items: map[types.UID]*list.Element{}}
}

func (b *backoffCache) get(uid types.UID, initial time.Duration) time.Duration {
	if e, ok := b.items[uid]; ok {
		return e.Value.(*backoffEntry).wait
	}
	return initial
}

func (b *backoffCache) grow(uid types.UID, initial, maxWait time.Duration) {
	if e, ok := b.items[uid]; ok {
		entry := e.Value.(*backoffEntry)
		entry.wait = min(2*entry.wait, maxWait)
		b.order.MoveToFront(e)
		return
	}
	b.items[uid] = b.order.PushFront(&backoffEntry{uid: uid, wait: initial})
	for b.order.Len() > b.size {
		last := b.order.Back()
		b.order.Remove(last)
		delete(b.items, last.Value.(*backoffEntry).uid)
	}
}

func (b *backoffCache) remove(uid types.UID) {
	if e, ok := b.items[uid]; ok {
		b.order.Remove(e)
		delete(b.items, uid)
	}
}
