package externalgrpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	egrpc "draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/cloudprovider/providertest"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// member is a node of group g, Ready for an hour (fit to copy), with
// slices of the given number of devices (none: 0).
func member(g, name string, devices int) []runtime.Object {
	n := fx.Node(name, 32, 128, nil)
	n.Labels[nodegroup.GroupLabel] = g
	n.Spec.ProviderID = local.ProviderIDPrefix + g + "/" + name
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour))
	objs := []runtime.Object{n}
	if devices > 0 {
		s := fx.GPUSlice(name, devices)
		objs = append(objs, s)
	}
	return objs
}

// env is a service over the local provider on a fake clientset and the
// externalgrpc provider talking to it.
type env struct {
	client  *fake.Clientset
	service *Service
	p       *egrpc.Provider
}

func newEnv(t *testing.T, ngs []*nodegroup.NodeGroup, so Options, po egrpc.Options, objs ...runtime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	lp, err := local.New(local.Options{Client: client, Groups: ngs})
	if err != nil {
		t.Fatal(err)
	}
	svc := New(lp, so)
	addr, stop, err := svc.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	po.Client, po.Kube = protos.NewCloudProviderClient(conn), client
	p, err := egrpc.New(po)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{client: client, service: svc, p: p}
}

func TestProviderContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Env {
		e := newEnv(t, providertest.NodeGroups(), Options{}, egrpc.Options{}, member("gpu", "gpu-0", 8)...)
		m, err := e.client.CoreV1().Nodes().Get(context.Background(), "gpu-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &providertest.Env{Provider: e.p, Group: "gpu", Plain: "plain", Member: m, Settle: e.p.Refresh, GroupPrice: 1.25}
	})
}

func devices(slices []*resourceapi.ResourceSlice) (n int, drivers []string) {
	for _, s := range slices {
		n += len(s.Spec.Devices)
		drivers = append(drivers, s.Spec.Driver)
	}
	return n, drivers
}

func nodeOf(objs []runtime.Object) *v1.Node { return objs[0].(*v1.Node) }
