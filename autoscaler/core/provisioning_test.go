package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/test/fakeprovider"
)

// requestStore is the API server's ProvisioningRequests as the loop sees
// them: an informer's indexer that status writes update, as a watch would.
type requestStore struct {
	mu       sync.Mutex
	indexer  cache.Indexer
	rv       int
	writes   int
	deleted  []string
	failNext error
}

func newRequestStore() *requestStore {
	return &requestStore{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

func (s *requestStore) add(t *testing.T, pr *prv1.ProvisioningRequest) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	pr.ResourceVersion = strconv.Itoa(s.rv)
	if err := s.indexer.Add(pr); err != nil {
		t.Fatal(err)
	}
}

func (s *requestStore) UpdateStatus(_ context.Context, pr *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failNext; err != nil {
		s.failNext = nil
		return nil, err
	}
	out := pr.DeepCopy()
	s.rv++
	s.writes++
	out.ResourceVersion = strconv.Itoa(s.rv)
	return out, s.indexer.Update(out)
}

func (s *requestStore) Get(_ context.Context, namespace, name string) (*prv1.ProvisioningRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok, err := s.indexer.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(prv1.Resource("provisioningrequests"), name)
	}
	return obj.(*prv1.ProvisioningRequest).DeepCopy(), nil
}

func (s *requestStore) Delete(_ context.Context, namespace, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, namespace+"/"+name)
	obj, ok, err := s.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return err
	}
	return s.indexer.Delete(obj)
}

func (s *requestStore) get(t *testing.T, name string) *prv1.ProvisioningRequest {
	t.Helper()
	obj, ok, err := s.indexer.GetByKey("default/" + name)
	if err != nil || !ok {
		t.Fatalf("request %s: %v (found %v)", name, err, ok)
	}
	return obj.(*prv1.ProvisioningRequest)
}

// gpuPodTemplate asks for one DRA-backed example.com/gpu a pod.
func gpuPodTemplate(name string) *v1.PodTemplate {
	return &v1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Template: v1.PodTemplateSpec{Spec: fx.Pod("x", 100, fx.GPUs(fx.GPUResource, 1)).Spec}}
}

func provReq(name, class, template string, count int, created time.Time) *prv1.ProvisioningRequest {
	return &prv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(created)},
		Spec: prv1.ProvisioningRequestSpec{ProvisioningClassName: class,
			PodSets: []prv1.PodSet{{PodTemplateRef: prv1.Reference{Name: template}, Count: int32(count)}}},
	}
}

// withRequests is the failure env's loop serving the store's requests.
func withRequests(t *testing.T, e *failureEnv, templates ...*v1.PodTemplate) *requestStore {
	t.Helper()
	store := newRequestStore()
	tmpl := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pt := range templates {
		if err := tmpl.Add(pt); err != nil {
			t.Fatal(err)
		}
	}
	e.a.cfg.ProvisioningRequests = provisioning.New(provisioning.Config{
		Requests: prlisters.NewProvisioningRequestLister(store.indexer), Templates: corelisters.NewPodTemplateLister(tmpl),
		Client: store})
	return store
}

func condition(pr *prv1.ProvisioningRequest, typ string) string {
	c := meta.FindStatusCondition(pr.Status.Conditions, typ)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}

// A best-effort-atomic request for 16 one-GPU pods on 8-GPU nodes: 2
// nodes in one atomic call; the next loops book them, so a regular
// pending pod gets a node of its own and the request is not decided
// again.
func TestAtomicRequestScalesUpOnceAndBooks(t *testing.T) {
	e := newFailureEnv(t)
	group := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
	store := withRequests(t, e, gpuPodTemplate("train"))
	store.add(t, provReq("train", provreq.BestEffortAtomic, "train", 16, e.now))
	res, err := e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := group.AtomicIncreases(); len(got) != 1 || got[0] != 2 || len(group.Increases()) != 0 {
		t.Fatalf("atomic increases %v, increases %v; want one atomic +2", got, group.Increases())
	}
	pr := store.get(t, "train")
	if condition(pr, prv1.Accepted) != "True/Accepted" || condition(pr, prv1.Provisioned) != "True/CapacityIsProvisioned" {
		t.Fatalf("conditions %+v, want Accepted and Provisioned=True/CapacityIsProvisioned", pr.Status.Conditions)
	}
	if len(res.ProvisioningRequests) != 1 || len(res.ProvisioningRequests[0].ScaleUp) != 1 || !res.ProvisioningRequests[0].ScaleUp[0].Atomic {
		t.Fatalf("loop result %+v, want the request's atomic scale-up", res.ProvisioningRequests)
	}
	if evs := e.events(EventTriggeredScaleUp); len(evs) != 1 || !strings.Contains(evs[0], "gpu 0->2") {
		t.Errorf("TriggeredScaleUp events %v, want one on the request naming gpu 0->2", evs)
	}

	// The nodes are coming: a regular pod asking for one GPU must not be
	// given the booked devices.
	e.at(time.Second)
	pending := unschedulablePods(1)[0].(*v1.Pod)
	if _, err := e.client.CoreV1().Pods("default").Create(e.ctx, pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPods(t, e, 1)
	writes := store.writes
	res, err = e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ProvisioningRequests) != 0 || store.writes != writes {
		t.Errorf("the provisioned request was decided again: %+v (%d writes)", res.ProvisioningRequests, store.writes-writes)
	}
	if res.ScaleUp == nil || res.ScaleUp.NodeGroup != "gpu" || res.ScaleUp.NewNodes != 1 {
		t.Fatalf("regular scale-up %+v, want gpu +1: the 16 GPUs coming are booked", res.ScaleUp)
	}
}

func waitForPods(t *testing.T, e *failureEnv, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pods, _ := e.listers.Pods.List(labelsEverything())
		if len(pods) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("informer has fewer than %d pods", n)
}

// A provider that cannot promise all or nothing gets IncreaseSize (CA's
// fallback); one that refuses gets the request retried, its group backed
// off.
func TestAtomicRequestProviderAnswers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fault         error
		wantAtomic    []int
		wantIncreases []int
		wantCondition string
		wantMessage   string
	}{
		{"atomic", nil, []int{2}, nil, "True/CapacityIsProvisioned", "16 pods on new nodes (gpu +2)"},
		{"not implemented: IncreaseSize", cloudprovider.ErrNotImplemented, nil, []int{2}, "True/CapacityIsProvisioned", ""},
		{"refused", cloudprovider.OutOfResources("STOCKOUT", "no GPUs"), nil, nil, "False/CapacityIsNotFound",
			"the atomic scale-up failed: scale up node group gpu by 2: OutOfResource.STOCKOUT: no GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFailureEnv(t)
			group := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{AtomicIncreaseSizeErr: tc.fault})
			store := withRequests(t, e, gpuPodTemplate("train"))
			store.add(t, provReq("train", provreq.BestEffortAtomic, "train", 16, e.now))
			if _, err := e.a.RunOnce(e.ctx); err != nil {
				t.Fatal(err)
			}
			pr := store.get(t, "train")
			c := meta.FindStatusCondition(pr.Status.Conditions, prv1.Provisioned)
			if condition(pr, prv1.Provisioned) != tc.wantCondition || !strings.Contains(c.Message, tc.wantMessage) {
				t.Fatalf("Provisioned %+v, want %s with %q", c, tc.wantCondition, tc.wantMessage)
			}
			if fmt.Sprint(group.AtomicIncreases()) != fmt.Sprint(tc.wantAtomic) || fmt.Sprint(group.Increases()) != fmt.Sprint(tc.wantIncreases) {
				t.Errorf("atomic %v, increases %v; want %v and %v", group.AtomicIncreases(), group.Increases(), tc.wantAtomic, tc.wantIncreases)
			}
		})
	}
}

// A refused atomic scale-up leaves nothing of the request in the loop's
// simulation: the regular pod pending beside it is not given the spare
// room of nodes the cloud did not give, it gets a node of its own.
func TestRefusedAtomicScaleUpLeavesNoRoom(t *testing.T) {
	e := newFailureEnv(t, unschedulablePods(1)...)
	gpu := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{AtomicIncreaseSizeErr: cloudprovider.OutOfResources("STOCKOUT", "no GPUs")})
	store := withRequests(t, e, gpuPodTemplate("train"))
	store.add(t, provReq("train", provreq.BestEffortAtomic, "train", 10, e.now))
	waitForPods(t, e, 1)
	res, err := e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := condition(store.get(t, "train"), prv1.Provisioned); got != "False/CapacityIsNotFound" {
		t.Fatalf("request %s, want False/CapacityIsNotFound (gpu refused)", got)
	}
	if res.ScaleUp == nil || res.ScaleUp.NewNodes != 1 || len(res.ScaleUp.Pods) != 1 || fmt.Sprint(gpu.Increases()) != "[1]" {
		t.Fatalf("regular scale-up %+v (increases %v), want gpu +1 for train-0: the refused nodes are not there", res.ScaleUp, gpu.Increases())
	}
}

// check-capacity never scales up; the capacity it finds is booked against
// regular pods; a retried request waits for its backoff; noRetry fails;
// a missing template fails only its own request.
func TestCheckCapacityRequestsInTheLoop(t *testing.T) {
	e := newFailureEnv(t)
	gpu := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
	if err := gpu.AddReadyNodes(e.ctx, 1); err != nil { // 8 free GPUs
		t.Fatal(err)
	}
	e.at(time.Second)
	store := withRequests(t, e, gpuPodTemplate("train"))
	e.a.cfg.ProvisioningRequests = provisioning.New(provisioning.Config{
		Requests: prlisters.NewProvisioningRequestLister(store.indexer), Templates: corelisters.NewPodTemplateLister(templateIndexer(t, gpuPodTemplate("train"))),
		Client: store, BatchProcessing: true})
	store.add(t, provReq("a-fits", provreq.CheckCapacity, "train", 6, e.now))
	store.add(t, provReq("b-too-big", provreq.CheckCapacity, "train", 4, e.now.Add(time.Second)))
	noRetry := provReq("c-no-retry", provreq.CheckCapacity, "train", 4, e.now.Add(2*time.Second))
	noRetry.Spec.Parameters = map[string]prv1.Parameter{provreq.NoRetryParameter: "true"}
	store.add(t, noRetry)
	store.add(t, provReq("d-no-template", provreq.CheckCapacity, "missing", 1, e.now.Add(3*time.Second)))
	store.add(t, provReq("e-gke", "queued-provisioning.gke.io", "train", 1, e.now.Add(4*time.Second)))
	if _, err := e.a.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"a-fits":        {prv1.Provisioned, "True/CapacityIsFound"},
		"b-too-big":     {prv1.Provisioned, "False/CapacityIsNotFound"},
		"c-no-retry":    {prv1.Failed, "True/CapacityIsNotFound"},
		"d-no-template": {prv1.Failed, "True/FailedToCreatePods"},
		"e-gke":         {prv1.Provisioned, "none"},
	}
	for name, w := range want {
		if got := condition(store.get(t, name), w[0]); got != w[1] {
			t.Errorf("%s: %s %s, want %s", name, w[0], got, w[1])
		}
	}
	if len(gpu.Increases())+len(gpu.AtomicIncreases()) != 0 {
		t.Fatalf("check-capacity scaled up: %v %v", gpu.Increases(), gpu.AtomicIncreases())
	}
	_, status := readStatus(t, e.a)
	listed := map[string]string{}
	for _, r := range status.ProvisioningRequests {
		listed[r.Name] = r.Condition.Type + "=" + string(r.Condition.Status) + "/" + r.Condition.Reason
	}
	if listed["a-fits"] != "Provisioned=True/CapacityIsFound" || listed["d-no-template"] != "Failed=True/FailedToCreatePods" || len(listed) != 4 {
		t.Errorf("status ConfigMap lists %v, want the four served requests with their conditions", listed)
	}
	if msg := meta.FindStatusCondition(store.get(t, "d-no-template").Status.Conditions, prv1.Failed).Message; !strings.Contains(msg,
		"ProvisioningRequest default/d-no-template: spec.podSets[0].podTemplateRef.name: PodTemplate default/missing not found") {
		t.Errorf("FailedToCreatePods message %q does not name the object and field", msg)
	}

	// Within its backoff (1m), b is not tried again; after, it is.
	e.at(30 * time.Second)
	res, err := e.a.RunOnce(e.ctx)
	if err != nil || len(res.ProvisioningRequests) != 0 {
		t.Fatalf("30s later: decided %+v (%v), want none (backoff)", res.ProvisioningRequests, err)
	}
	e.at(2 * time.Minute)
	res, err = e.a.RunOnce(e.ctx)
	if err != nil || len(res.ProvisioningRequests) != 1 || res.ProvisioningRequests[0].Name != "b-too-big" {
		t.Fatalf("after the backoff: decided %+v (%v), want b-too-big again", res.ProvisioningRequests, err)
	}
	// a's 6 GPUs are booked: b's 4 still do not fit the 8.
	if got := condition(store.get(t, "b-too-big"), prv1.Provisioned); got != "False/CapacityIsNotFound" {
		t.Errorf("b after a booked 6 of 8: %s, want False/CapacityIsNotFound", got)
	}
	// 10 minutes after Provisioned, a's booking expires and b fits.
	e.at(12 * time.Minute)
	if _, err := e.a.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := condition(store.get(t, "a-fits"), prv1.BookingExpired); got != "True/CapacityReservationTimeExpired" {
		t.Errorf("a after 10m: BookingExpired %s", got)
	}
	if got := condition(store.get(t, "b-too-big"), prv1.Provisioned); got != "True/CapacityIsFound" {
		t.Errorf("b after a's booking expired: %s, want True/CapacityIsFound", got)
	}
}

func templateIndexer(t *testing.T, ts ...*v1.PodTemplate) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pt := range ts {
		if err := idx.Add(pt); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// Pods that consume a request never drive a regular scale-up.
func TestConsumersDoNotScaleUp(t *testing.T) {
	pods := unschedulablePods(3)
	for _, o := range pods[:2] {
		o.(*v1.Pod).Annotations = map[string]string{provreq.ConsumeAnnotation: "train"}
	}
	e := newFailureEnv(t, pods...)
	group := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
	withRequests(t, e, gpuPodTemplate("train"))
	res, err := e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ScaleUp == nil || len(res.ScaleUp.Pods) != 1 || res.ScaleUp.Pods[0].Name != "train-2" {
		t.Fatalf("scale-up %+v, want one node for train-2 only", res.ScaleUp)
	}
	if evs := e.events(EventNotTriggerScaleUp); len(evs) != 2 || !strings.Contains(evs[0], "because it's consuming ProvisioningRequest default/train") {
		t.Errorf("events %v, want two naming the consumed request", evs)
	}
	_ = group
}

// A loop superseded before its scale-up (Config.Hold false) leaves a
// best-effort-atomic request undecided: no nodes asked for, no
// Provisioned condition written, nothing reported; the next loop decides
// it as if the superseded one had not run.
func TestSupersededLoopLeavesRequestUndecided(t *testing.T) {
	e := newFailureEnv(t)
	group := e.provider.AddGroup(groupOf8GPUs("gpu", 8), fakeprovider.Faults{})
	store := withRequests(t, e, gpuPodTemplate("train"))
	store.add(t, provReq("train", provreq.BestEffortAtomic, "train", 16, e.now))
	goAhead := false
	e.a.cfg.Hold = func(context.Context) bool { return goAhead }
	res, err := e.a.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(group.AtomicIncreases()) != 0 || len(group.Increases()) != 0 || !res.Superseded || len(res.ProvisioningRequests) != 0 {
		t.Fatalf("superseded loop: atomic increases %v, increases %v, superseded %v, reports %+v; want nothing",
			group.AtomicIncreases(), group.Increases(), res.Superseded, res.ProvisioningRequests)
	}
	if got := condition(store.get(t, "train"), prv1.Provisioned); got != "none" {
		t.Fatalf("Provisioned = %s after a superseded loop, want none", got)
	}
	goAhead = true
	if _, err := e.a.RunOnce(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := group.AtomicIncreases(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("atomic increases %v in the next loop, want one +2", got)
	}
	if got := condition(store.get(t, "train"), prv1.Provisioned); got != "True/CapacityIsProvisioned" {
		t.Fatalf("Provisioned = %s, want True/CapacityIsProvisioned", got)
	}
}
