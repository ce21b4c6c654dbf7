package apinodes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"

	"draxr.dev/draxr/cloudprovider/providertest"
	fx "draxr.dev/draxr/simulator/fixtures"
)

// Every name is tried; each failure is named, what succeeded stays done.
func TestForJoinsEveryFailure(t *testing.T) {
	var done atomic.Int32
	err := For(context.Background(), []string{"a", "bad-1", "b", "bad-2"}, func(_ context.Context, name string) error {
		if strings.HasPrefix(name, "bad") {
			return errors.New(name + " failed")
		}
		done.Add(1)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "bad-1 failed") || !strings.Contains(err.Error(), "bad-2 failed") {
		t.Errorf("error %v, want both failures named", err)
	}
	if done.Load() != 2 {
		t.Errorf("%d succeeded, want 2", done.Load())
	}
}

// An atomic increase with one failure leaves nothing behind: every name
// that was created is removed again, and the error says so.
func TestAllOrNoneRollsBack(t *testing.T) {
	var mu sync.Mutex
	live := map[string]bool{}
	create := func(_ context.Context, name string) error {
		if name == "bad" {
			return errors.New("bad: quota exceeded")
		}
		mu.Lock()
		defer mu.Unlock()
		live[name] = true
		return nil
	}
	remove := func(_ context.Context, name string) error {
		mu.Lock()
		defer mu.Unlock()
		delete(live, name)
		return nil
	}
	err := AllOrNone(context.Background(), []string{"a", "b", "bad", "c"}, create, remove)
	if err == nil || !strings.Contains(err.Error(), "bad: quota exceeded") || !strings.Contains(err.Error(), "the 3 created were removed") {
		t.Errorf("error %v, want the failure and the rollback named", err)
	}
	if len(live) != 0 {
		t.Errorf("left after a failed atomic increase: %v, want none", live)
	}
	if err := AllOrNone(context.Background(), []string{"a", "b"}, create, remove); err != nil || len(live) != 2 {
		t.Errorf("all created: err %v, %d live, want nil and 2", err, len(live))
	}
}

// A created node's slices are owned by it (the server's UID), a slice
// published twice is no error, and Delete removes the pods bound to the
// node and the node, and leaves the rest alone. (The fake server ignores
// DeleteCollection's field selector: test/e2e/kwok checks the slices go
// with their node on a real one.)
func TestCreatePublishDelete(t *testing.T) {
	ctx := context.Background()
	other := fx.Pod("elsewhere", 100, nil)
	other.Namespace, other.Spec.NodeName = "default", "n2"
	c := fake.NewClientset(other)
	node := fx.Node("n1", 8, 32, nil)
	node.UID = "a-uid-the-server-replaces"
	created, err := CreateNode(ctx, c, "g", node)
	if err != nil {
		t.Fatal(err)
	}
	created.UID = "server-uid" // the fake server assigns none
	slice := fx.GPUSlice("n1", 4)
	for range 2 {
		if err := PublishSlices(ctx, c, created, []*resourceapi.ResourceSlice{slice}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ResourceV1().ResourceSlices().Get(ctx, slice.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := got.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].Name != "n1" || o[0].UID != "server-uid" {
		t.Errorf("owners %v, want the Node n1", o)
	}
	bound := fx.Pod("bound", 100, nil)
	bound.Namespace, bound.Spec.NodeName = "default", "n1"
	if _, err := c.CoreV1().Pods("default").Create(ctx, bound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, c, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err == nil {
		t.Error("node n1 still exists")
	}
	pods, _ := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 || pods.Items[0].Name != "elsewhere" {
		t.Errorf("pods left %v, want only the one on another node", pods.Items)
	}
	if err := Delete(ctx, c, "n1"); err != nil {
		t.Errorf("deleting a node already gone: %v", err)
	}
}

// With the informer's lister, nodes are read from its cache and the API
// server gets no request; without it, one LIST. Nodes without a provider
// ID are left out either way.
func TestByProviderIDReadsTheCache(t *testing.T) {
	a, b, bare := fx.Node("a", 8, 32, nil), fx.Node("b", 8, 32, nil), fx.Node("bare", 8, 32, nil)
	a.Spec.ProviderID, b.Spec.ProviderID = "cloud:///a", "cloud:///b"
	client := fake.NewClientset(a, b, bare)
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().Nodes().Lister()
	ctx := providertest.StartInformers(t, factory)

	for _, tc := range []struct {
		name      string
		lister    corelisters.NodeLister
		wantLists int
	}{{"lister", lister, 0}, {"no lister", nil, 1}} {
		client.ClearActions()
		got, err := ByProviderID(ctx, tc.lister, client)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got["cloud:///a"].Name != "a" || got["cloud:///b"].Name != "b" {
			t.Errorf("%s: nodes %v, want a and b by provider ID", tc.name, got)
		}
		if lists := providertest.ListCalls(client, "nodes"); lists != tc.wantLists {
			t.Errorf("%s: %d LISTs of nodes, want %d", tc.name, lists, tc.wantLists)
		}
	}
}

// A node's slices come from the informer's lister when there is one (no
// request), else from one LIST; only the node's own are returned.
func TestNodeSlicesReadTheCache(t *testing.T) {
	client := fake.NewClientset(fx.GPUSlice("a", 2), fx.GPUSlice("b", 2))
	factory := informers.NewSharedInformerFactory(client, 0)
	lister := factory.Resource().V1().ResourceSlices().Lister()
	ctx := providertest.StartInformers(t, factory)
	for _, tc := range []struct {
		name      string
		lister    resourcelisters.ResourceSliceLister
		wantLists int
	}{{"lister", lister, 0}, {"no lister", nil, 1}} {
		client.ClearActions()
		got, err := NodeSlices(ctx, tc.lister, client, "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || *got[0].Spec.NodeName != "a" {
			t.Errorf("%s: slices %v, want node a's one", tc.name, got)
		}
		if lists := providertest.ListCalls(client, "resourceslices"); lists != tc.wantLists {
			t.Errorf("%s: %d LISTs of slices, want %d", tc.name, lists, tc.wantLists)
		}
	}
}
