package plugins

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"

	"draxr.dev/draxr/scheduler/classes"
	"draxr.dev/draxr/scheduler/kubeversion"
	fx "draxr.dev/draxr/simulator/fixtures"
)

// testHandle is the part of the framework handle WithResolver reads.
type testHandle struct {
	fwk.Handle
	factory informers.SharedInformerFactory
	dra     fwk.SharedDRAManager
}

func (h testHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }
func (h testHandle) SharedDRAManager() fwk.SharedDRAManager                 { return h.dra }

// upstreamDRA stands for the scheduler's own DRA manager; only the
// resolver is replaced.
type upstreamDRA struct{ fwk.SharedDRAManager }

func (upstreamDRA) DeviceClassResolver() fwk.DeviceClassResolver { return nil }

var (
	t0  = fx.Epoch
	t1  = fx.Epoch.Add(time.Hour)
	gpu = fx.GPUResource
)

func class(name string, created time.Time, extended v1.ResourceName) *resourceapi.DeviceClass {
	c := fx.Class(name, fx.Driver, extended, created)
	c.UID = ""
	return c
}

// apiOp changes classes in the API server, as a user would.
type apiOp func(ctx context.Context, c kubernetes.Interface) error

func create(name string, created time.Time, extended v1.ResourceName) apiOp {
	return func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.ResourceV1().DeviceClasses().Create(ctx, class(name, created, extended), metav1.CreateOptions{})
		return err
	}
}

func remove(name string) apiOp {
	return func(ctx context.Context, c kubernetes.Interface) error {
		return c.ResourceV1().DeviceClasses().Delete(ctx, name, metav1.DeleteOptions{})
	}
}

func clearName(name string) apiOp {
	return func(ctx context.Context, c kubernetes.Interface) error {
		got, err := c.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Spec.ExtendedResourceName = nil
		_, err = c.ResourceV1().DeviceClasses().Update(ctx, got, metav1.UpdateOptions{})
		return err
	}
}

// watchStarted is closed once the client serves its first watch.
func watchStarted(client *fake.Clientset) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(started) })
		return true, w, nil
	})
	return started
}

// The resolver WithResolver installs follows the KEP's tie-break whatever
// the order the informer delivers classes in, and a class that is deleted
// or stops naming a resource hands the name back to the other class.
func TestWithResolverTieBreak(t *testing.T) {
	tests := []struct {
		name string
		// existing are in the API server before the scheduler starts (a
		// restart: the informer lists them in its own order).
		existing []*resourceapi.DeviceClass
		ops      []apiOp
		// want maps resource names to the backing class ("" for none).
		want map[v1.ResourceName]string
	}{
		{
			name: "newest wins, added in order",
			ops:  []apiOp{create("old", t0, gpu), create("new", t1, gpu)},
			want: map[v1.ResourceName]string{gpu: "new", classes.ImplicitName("old"): "old", classes.ImplicitName("new"): "new"},
		},
		{
			name: "newest wins, added newest first",
			ops:  []apiOp{create("new", t1, gpu), create("old", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "new", classes.ImplicitName("old"): "old"},
		},
		{
			name:     "after a restart the older class keeps its implicit name",
			existing: []*resourceapi.DeviceClass{class("a-old", t0, gpu), class("z-new", t1, gpu)},
			want:     map[v1.ResourceName]string{gpu: "z-new", classes.ImplicitName("a-old"): "a-old", classes.ImplicitName("z-new"): "z-new"},
		},
		{
			name: "same creationTimestamp: first name wins",
			ops:  []apiOp{create("b", t0, gpu), create("a", t0, gpu)},
			want: map[v1.ResourceName]string{gpu: "a", classes.ImplicitName("b"): "b"},
		},
		{
			name: "deleting the winner hands the name to the other",
			ops:  []apiOp{create("old", t0, gpu), create("new", t1, gpu), remove("new")},
			want: map[v1.ResourceName]string{gpu: "old", classes.ImplicitName("new"): ""},
		},
		{
			name: "clearing the winner's name hands it to the other",
			ops:  []apiOp{create("old", t0, gpu), create("new", t1, gpu), clearName("new")},
			want: map[v1.ResourceName]string{gpu: "old", classes.ImplicitName("new"): "new"},
		},
		{
			name: "deleting the loser keeps the winner",
			ops:  []apiOp{create("old", t0, gpu), create("new", t1, gpu), remove("old")},
			want: map[v1.ResourceName]string{gpu: "new", classes.ImplicitName("old"): ""},
		},
		{
			name:     "clearing the loser's name keeps the winner",
			existing: []*resourceapi.DeviceClass{class("old", t0, gpu), class("new", t1, gpu)},
			ops:      []apiOp{clearName("old")},
			want:     map[v1.ResourceName]string{gpu: "new", classes.ImplicitName("old"): "old"},
		},
		{
			name: "deleting both drops the name",
			ops:  []apiOp{create("old", t0, gpu), create("new", t1, gpu), remove("new"), remove("old")},
			want: map[v1.ResourceName]string{gpu: ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var objs []runtime.Object
			for _, c := range tt.existing {
				objs = append(objs, c)
			}
			client := fake.NewClientset(objs...)
			watching := watchStarted(client)
			factory := informers.NewSharedInformerFactory(client, 0)
			h := NewResolvers().WithResolver(testHandle{factory: factory, dra: upstreamDRA{}})
			resolver := h.SharedDRAManager().DeviceClassResolver()
			if resolver == nil {
				t.Fatal("WithResolver kept the upstream resolver")
			}
			factory.Start(ctx.Done())
			defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
			factory.WaitForCacheSync(ctx.Done())
			// The fake API server drops events sent before the watch starts.
			select {
			case <-watching:
			case <-ctx.Done():
				t.Fatal("the DeviceClass informer never started watching")
			}
			for _, op := range tt.ops {
				if err := op(ctx, client); err != nil {
					t.Fatal(err)
				}
			}
			// Events reach the handler in order: once a sentinel class
			// created last resolves, every op before it has been seen.
			if err := create("zz-sentinel", t0, "")(ctx, client); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return resolver.GetDeviceClass(classes.ImplicitName("zz-sentinel")) != nil, nil
			})
			if err != nil {
				t.Fatal("the resolver never saw the sentinel class")
			}
			for name, want := range tt.want {
				got := ""
				if c := resolver.GetDeviceClass(name); c != nil {
					got = c.Name
				}
				if got != want {
					t.Errorf("%s resolves to %q, want %q", name, got, want)
				}
			}
		})
	}
}

// With DRA disabled there is nothing to resolve: the handle is unchanged.
func TestWithResolverWithoutDRA(t *testing.T) {
	h := testHandle{factory: informers.NewSharedInformerFactory(fake.NewClientset(), 0)}
	if got := NewResolvers().WithResolver(h); got != fwk.Handle(h) {
		t.Errorf("WithResolver wrapped a handle without a DRA manager: %#v", got)
	}
}

// Plugins built for one scheduler (one Resolvers) share one resolver per
// informer factory, so a class event reaches all of them.
func TestWithResolverSharedPerFactory(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	other := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	rs := NewResolvers()
	a := rs.WithResolver(testHandle{factory: factory, dra: upstreamDRA{}}).SharedDRAManager().DeviceClassResolver()
	b := rs.WithResolver(testHandle{factory: factory, dra: upstreamDRA{}}).SharedDRAManager().DeviceClassResolver()
	c := rs.WithResolver(testHandle{factory: other, dra: upstreamDRA{}}).SharedDRAManager().DeviceClassResolver()
	if a != b {
		t.Error("two plugins of one scheduler got different resolvers")
	}
	if a == c {
		t.Error("two schedulers share a resolver")
	}
}

func TestOptionsRegisterEveryAlias(t *testing.T) {
	if got, want := len(Options()), 3; got != want {
		t.Errorf("Options() = %d options, want one per wrapped plugin (%d)", got, want)
	}
}

// clientHandle is a framework handle with a client whose API server
// reports version.
type clientHandle struct {
	fwk.Handle
	client kubernetes.Interface
}

func (h clientHandle) ClientSet() kubernetes.Interface { return h.client }

// draxr-scheduler refuses to start against an API server older than the
// Kubernetes minor it is built on, asking once; a current one passes.
func TestServerCheck(t *testing.T) {
	built := version.MustParseGeneric(kubeversion.Minor())
	for _, tc := range []struct {
		server  string
		wantErr string
	}{
		{server: fmt.Sprintf("v1.%d.4", built.Minor()-1), wantErr: "upgrade the API servers first"},
		{server: fmt.Sprintf("v1.%d.0", built.Minor())},
	} {
		client := fake.NewClientset()
		client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &apimachineryversion.Info{GitVersion: tc.server}
		var check serverCheck
		made := 0
		factory := check.before(func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
			made++
			return nil, nil
		})
		for range 3 {
			_, err := factory(context.Background(), nil, clientHandle{client: client})
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("server %s: err = %v, want %q", tc.server, err, tc.wantErr)
			}
		}
		if want := map[bool]int{true: 0, false: 3}[tc.wantErr != ""]; made != want {
			t.Errorf("server %s: %d plugins built, want %d", tc.server, made, want)
		}
		var versionCalls int
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "version" {
				versionCalls++
			}
		}
		if versionCalls > 1 {
			t.Errorf("server %s: asked the version %d times, want once", tc.server, versionCalls)
		}
	}
}
