package provisioning

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaleup"
)

// laggingAPI is an API server whose writes the cache has not seen yet.
type laggingAPI struct {
	objects map[string]*prv1.ProvisioningRequest
	writes  int
	// failing makes writes fail (the API server unreachable).
	failing bool
}

func (a *laggingAPI) Get(_ context.Context, ns, name string) (*prv1.ProvisioningRequest, error) {
	return a.objects[ns+"/"+name].DeepCopy(), nil
}

func (a *laggingAPI) UpdateStatus(_ context.Context, pr *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error) {
	if a.failing {
		return nil, errors.New("connection refused")
	}
	a.writes++
	out := pr.DeepCopy()
	out.ResourceVersion += "+"
	a.objects[provreq.Key(pr)] = out
	return out.DeepCopy(), nil
}

func (a *laggingAPI) Delete(context.Context, string, string) error { return nil }

// laggingFixture is one atomic request, in a cache that never sees
// writes and in the laggingAPI, and a processor over both.
func laggingFixture(t *testing.T) (time.Time, cache.Indexer, *laggingAPI, *Processor) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pr := &prv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default", UID: "u", ResourceVersion: "1",
		CreationTimestamp: metav1.NewTime(now)},
		Spec: prv1.ProvisioningRequestSpec{ProvisioningClassName: provreq.BestEffortAtomic,
			PodSets: []prv1.PodSet{{PodTemplateRef: prv1.Reference{Name: "t"}, Count: 1}}}}
	idx := newIndexer()
	if err := idx.Add(pr.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	api := &laggingAPI{objects: map[string]*prv1.ProvisioningRequest{"default/train": pr.DeepCopy()}}
	p := New(Config{Requests: prlisters.NewProvisioningRequestLister(idx), Templates: corelisters.NewPodTemplateLister(newIndexer()), Client: api})
	return now, idx, api, p
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// A request is never decided twice because the cache lags a write: not
// after this processor's own write (it keeps what it wrote), and not
// after another replica's (the request is read fresh before it is taken).
func TestStaleCacheNeverDecidesTwice(t *testing.T) {
	now, idx, api, p := laggingFixture(t)
	ctx := context.Background()

	l, err := p.Start(ctx, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	todo := l.ToDecide()
	if len(todo) != 1 || l.Accept(ctx, todo[0]) == nil {
		t.Fatalf("first loop: %d to decide, want the request taken up", len(todo))
	}
	l.Record(ctx, provreq.Decision{Request: todo[0], Condition: provreq.Condition{Type: prv1.Provisioned,
		Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsProvisioned}})

	// The cache still holds resource version 1: the processor's own write
	// is what it knows.
	l, err = p.Start(ctx, nil, now.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if todo := l.ToDecide(); len(todo) != 0 {
		t.Fatalf("second loop over a lagging cache decides %d again", len(todo))
	}
	if b := l.Booked(); len(b) != 1 {
		t.Errorf("second loop books %d requests, want the provisioned one", len(b))
	}

	// A fresh processor (a new leader) with the same lagging cache: the
	// fresh read says the request is provisioned.
	p2 := New(Config{Requests: prlisters.NewProvisioningRequestLister(idx), Templates: corelisters.NewPodTemplateLister(newIndexer()), Client: api})
	l, err = p2.Start(ctx, []*v1.Pod{}, now.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	todo = l.ToDecide()
	if len(todo) != 1 {
		t.Fatalf("new leader sees %d to decide in its cache, want 1 (the cache lags)", len(todo))
	}
	if got := l.Accept(ctx, todo[0]); got != nil {
		t.Fatalf("new leader took up a request the API server says is provisioned: %+v", got.Status.Conditions)
	}
}

// A decision whose write failed is not made again: the next loop writes
// it again instead.
func TestFailedWriteIsRetriedNotRedecided(t *testing.T) {
	now, _, api, p := laggingFixture(t)
	ctx := context.Background()
	l, _ := p.Start(ctx, nil, now)
	todo := l.ToDecide()
	taken := l.Accept(ctx, todo[0])
	api.failing = true
	l.Record(ctx, provreq.Decision{Request: taken, Condition: provreq.Condition{Type: prv1.Provisioned,
		Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsProvisioned}})
	if l.Err() == nil {
		t.Fatal("a failed write is not reported")
	}
	api.failing = false
	l, _ = p.Start(ctx, nil, now.Add(time.Second))
	if todo := l.ToDecide(); len(todo) != 0 {
		t.Fatalf("the request is decided again after a failed write")
	}
	if got := api.objects["default/train"]; !provreq.IsTrue(got, prv1.Provisioned) {
		t.Errorf("the next loop did not write the decision: %+v", got.Status.Conditions)
	}
}

// Backoff doubles per try up to the maximum, and the oldest entries go
// past the cache's size.
func TestBackoffCache(t *testing.T) {
	b := newBackoffCache(2)
	b.grow("a", time.Minute, 5*time.Minute)
	for _, want := range []time.Duration{2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute} {
		b.grow("a", time.Minute, 5*time.Minute)
		if got := b.get("a", time.Minute); got != want {
			t.Fatalf("backoff %v, want %v", got, want)
		}
	}
	b.grow("b", time.Minute, 5*time.Minute)
	b.grow("c", time.Minute, 5*time.Minute) // a is the oldest: forgotten
	if got := b.get("a", time.Minute); got != time.Minute {
		t.Errorf("a after the cache filled: %v, want the initial backoff", got)
	}
}

// A request provisioned in one domain gets the domain in
// provisioningClassDetails in the same status write as Provisioned=True:
// Kueue reads details only on that transition.
func TestDomainWrittenWithProvisioned(t *testing.T) {
	now, _, api, p := laggingFixture(t)
	ctx := context.Background()
	l, err := p.Start(ctx, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	pr := l.Accept(ctx, l.ToDecide()[0])
	writes := api.writes
	l.Record(ctx, provreq.Decision{Request: pr, Topology: &scaleup.Topology{Key: "example.com/rack", Value: "b"},
		Condition: provreq.Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsProvisioned}})
	stored := api.objects["default/train"]
	if api.writes != writes+1 || !provreq.IsTrue(stored, prv1.Provisioned) || stored.Status.ProvisioningClassDetails["example.com/rack"] != "b" {
		t.Fatalf("%d writes, stored status %+v; want one write with Provisioned=True and example.com/rack=b", api.writes-writes, stored.Status)
	}
}
