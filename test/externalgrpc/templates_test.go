package externalgrpc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/cloudprovider"
	egrpc "draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/cloudprovider/providertest"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/nodegroup/capi"
)

const gpuLabel = "cloud.example.com/accelerator"

// pool is a group of min 0 whose template (what the service sends)
// describes 8 devices of fx.Driver; gpuNode marks its template node as a
// GPU node of driver dra.example.com with 4 GPUs (the synthetic slice's
// inputs).
func pool(name string, gpuNode bool) *nodegroup.NodeGroup {
	g := poolWithoutSlices(name, gpuNode)
	g.Spec.ResourceSlices = append(g.Spec.ResourceSlices, fx.GPUSlice("x", 8).Spec)
	return g
}

// poolWithoutSlices describes no slices: the local provider behind the
// service then publishes none on members (it would replace theirs).
func poolWithoutSlices(name string, gpuNode bool) *nodegroup.NodeGroup {
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodegroup.Spec{MaxSize: 4, Template: *fx.Node("t", 32, 128, nil)}}
	if gpuNode {
		g.Spec.Template.Labels[gpuLabel] = "a100"
		g.Spec.Template.Annotations = map[string]string{capi.DRADriverAnnotation: "dra.example.com", capi.GPUCountAnnotation: "4"}
	}
	return g
}

func configMap(data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "slices"}, Data: data}
}

const twoDevices = `
resourceSlices:
- driver: cm.example.com
  devices:
  - name: d0
  - name: d1
`

// The template's slices come from, in order: a Ready member's slices, the
// ConfigMap, the service's resourceSlices, CA's synthetic slice.
func TestTemplateSlices(t *testing.T) {
	tests := []struct {
		name        string
		group       *nodegroup.NodeGroup
		objs        []runtime.Object
		service     Options
		configMap   bool
		wantDevices int
		wantDrivers []string
		wantErr     string
		// fromMember: the service is not asked for a template at all.
		fromMember bool
	}{
		{name: "a Ready member's slices over everything", group: poolWithoutSlices("a100-pool", true),
			objs:      append(member("a100-pool", "a100-pool-0", 3), configMap(map[string]string{"a": "nodeGroup: a100-pool\n" + twoDevices})),
			configMap: true, service: Options{GPULabel: gpuLabel}, wantDevices: 3, wantDrivers: []string{fx.Driver}, fromMember: true},
		{name: "a member without slices: the ConfigMap", group: poolWithoutSlices("a100-pool", true),
			objs:      append(member("a100-pool", "a100-pool-0", 0), configMap(map[string]string{"a": "nodeGroup: a100-pool\n" + twoDevices})),
			configMap: true, service: Options{GPULabel: gpuLabel}, wantDevices: 2, wantDrivers: []string{"cm.example.com"}},
		{name: "ConfigMap entry by regular expression", group: pool("a100-pool", false),
			objs:      []runtime.Object{configMap(map[string]string{"a": "nodeGroupRegexp: a100-.*\n" + twoDevices, "b": "nodeGroupRegexp: h100-.*\n" + twoDevices})},
			configMap: true, wantDevices: 2, wantDrivers: []string{"cm.example.com"}},
		{name: "ConfigMap without an entry for the group: the service's slices", group: pool("a100-pool", false),
			objs:      []runtime.Object{configMap(map[string]string{"a": "nodeGroup: other\n" + twoDevices})},
			configMap: true, wantDevices: 8, wantDrivers: []string{fx.Driver}},
		{name: "the service's slices over the synthetic slice", group: pool("a100-pool", true),
			service: Options{GPULabel: gpuLabel}, wantDevices: 8, wantDrivers: []string{fx.Driver}},
		{name: "an old service (no resourceSlices): CA's synthetic slice", group: pool("a100-pool", true),
			service: Options{GPULabel: gpuLabel, NoResourceSlices: true}, wantDevices: 4, wantDrivers: []string{"dra.example.com"}},
		{name: "an old service, no GPU label: a node without slices", group: pool("a100-pool", true),
			service: Options{NoResourceSlices: true}, wantDevices: 0},
		{name: "an old service, a node not of the GPU label: no slices", group: pool("a100-pool", false),
			service: Options{GPULabel: gpuLabel, NoResourceSlices: true}, wantDevices: 0},
		{name: "no member and no service template", group: pool("a100-pool", true), service: Options{NoTemplate: true},
			wantErr: "node group a100-pool: no Ready member node to copy and the service's NodeGroupTemplateNodeInfo returns no node"},
		{name: "bad ConfigMap entry named", group: pool("a100-pool", false), configMap: true,
			objs:    []runtime.Object{configMap(map[string]string{"gpu": "nodeGroup: a100-pool\nresourceSlices:\n- devices: [{name: d0}]\n"})},
			wantErr: `ConfigMap kube-system/slices key "gpu": resourceSlices: [0].driver is required`},
		{name: "two expressions match", group: pool("a100-pool", false), configMap: true,
			objs:    []runtime.Object{configMap(map[string]string{"x": "nodeGroupRegexp: a100.*\n" + twoDevices, "y": "nodeGroupRegexp: .*pool\n" + twoDevices})},
			wantErr: `ConfigMap kube-system/slices: keys "x" and "y" both match node group a100-pool`},
		{name: "missing ConfigMap named", group: pool("a100-pool", false), configMap: true,
			wantErr: "ConfigMap kube-system/slices (template_slices_config_map in --cloud-config) does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			po := egrpc.Options{}
			if tt.configMap {
				po.TemplateConfigMap = "kube-system/slices"
			}
			e := newEnv(t, []*nodegroup.NodeGroup{tt.group}, tt.service, po, tt.objs...)
			gs := e.p.NodeGroups()
			if len(gs) != 1 {
				t.Fatalf("%d groups, want 1", len(gs))
			}
			node, got, err := gs[0].TemplateNodeInfo()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || node == nil {
				t.Fatalf("template: %v, %v", node, err)
			}
			n, drivers := devices(got)
			slicesDrivers := slices2(drivers)
			if n != tt.wantDevices || !slices.Equal(slicesDrivers, tt.wantDrivers) {
				t.Errorf("template has %d devices of %v, want %d of %v", n, slicesDrivers, tt.wantDevices, tt.wantDrivers)
			}
			if calls := e.service.Calls("NodeGroupTemplateNodeInfo"); tt.fromMember && calls != 0 {
				t.Errorf("the service was asked for a template %d times; a Ready member with slices is the template", calls)
			}
			for _, s := range got {
				if s.Spec.NodeName == nil || *s.Spec.NodeName != node.Name || s.Spec.Pool.Name != node.Name {
					t.Errorf("slice %s: nodeName %v, pool %q; want both %s", s.Name, s.Spec.NodeName, s.Spec.Pool.Name, node.Name)
				}
			}
		})
	}
}

func slices2(d []string) []string {
	if len(d) == 0 {
		return nil
	}
	return d
}

// The template is asked once a loop, as in CA; Refresh asks again.
func TestTemplateCachedForTheLoop(t *testing.T) {
	e := newEnv(t, []*nodegroup.NodeGroup{pool("p", false)}, Options{}, egrpc.Options{})
	for range 3 {
		if _, _, err := e.p.NodeGroups()[0].TemplateNodeInfo(); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.service.Calls("NodeGroupTemplateNodeInfo"); got != 1 {
		t.Errorf("3 templates in one loop made %d calls, want 1", got)
	}
	if err := e.p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.p.NodeGroups()[0].TemplateNodeInfo(); err != nil {
		t.Fatal(err)
	}
	if got := e.service.Calls("NodeGroupTemplateNodeInfo"); got != 2 {
		t.Errorf("after Refresh: %d calls, want 2", got)
	}
}

// NodeGroupForNode and Nodes are asked once a loop; a change to the group
// lists its nodes again.
func TestCachedPerLoop(t *testing.T) {
	e := newEnv(t, providertest.NodeGroups(), Options{}, egrpc.Options{}, member("gpu", "gpu-0", 8)...)
	n := nodeOf(member("gpu", "gpu-0", 0))
	for range 3 {
		if g, err := e.p.NodeGroupForNode(n); err != nil || g == nil || g.Id() != "gpu" {
			t.Fatalf("NodeGroupForNode: %v, %v", g, err)
		}
	}
	g := e.p.NodeGroups()[0]
	for range 3 {
		if in, err := g.Nodes(); err != nil || len(in) != 1 || in[0].NodeName != "gpu-0" {
			t.Fatalf("Nodes: %+v, %v; want gpu-0", in, err)
		}
	}
	if a, b := e.service.Calls("NodeGroupForNode"), e.service.Calls("NodeGroupNodes"); a != 1 || b != 1 {
		t.Errorf("calls in one loop: NodeGroupForNode %d, NodeGroupNodes %d; want 1 each", a, b)
	}
	if err := g.IncreaseSize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Nodes(); err != nil {
		t.Fatal(err)
	}
	if got := e.service.Calls("NodeGroupNodes"); got != 2 {
		t.Errorf("NodeGroupNodes after IncreaseSize: %d calls, want 2", got)
	}
	if err := e.p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.NodeGroupForNode(n); err != nil {
		t.Fatal(err)
	}
	if got := e.service.Calls("NodeGroupForNode"); got != 2 {
		t.Errorf("NodeGroupForNode after Refresh: %d calls, want 2", got)
	}
}

// Service errors reach the loop typed: out of resources, not
// implemented, other (with the gRPC code), and a failed Refresh leaves no
// stale groups.
func TestServiceErrors(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		fault       error
		do          func(p cloudprovider.Provider) error
		wantClass   cloudprovider.ErrorClass
		wantCode    string
		wantNotImpl bool
		wantMsg     string
	}{
		{name: "stockout is out of resources", method: "NodeGroupIncreaseSize", fault: status.Error(codes.ResourceExhausted, "no a100 in us-east-1a"),
			do:        func(p cloudprovider.Provider) error { return p.NodeGroups()[0].IncreaseSize(context.Background(), 1) },
			wantClass: cloudprovider.OutOfResourcesErrorClass, wantCode: "ResourceExhausted",
			wantMsg: "NodeGroupIncreaseSize of node group gpu: no a100 in us-east-1a"},
		{name: "other failures keep their code", method: "NodeGroupIncreaseSize", fault: status.Error(codes.Unknown, "api throttled"),
			do:        func(p cloudprovider.Provider) error { return p.NodeGroups()[0].IncreaseSize(context.Background(), 1) },
			wantClass: cloudprovider.OtherErrorClass, wantCode: "Unknown", wantMsg: "api throttled"},
		{name: "delete failure", method: "NodeGroupDeleteNodes", fault: status.Error(codes.Internal, "instance locked"),
			do: func(p cloudprovider.Provider) error {
				if err := p.NodeGroups()[0].IncreaseSize(context.Background(), 1); err != nil {
					return err
				}
				if err := p.Refresh(context.Background()); err != nil {
					return err
				}
				return p.NodeGroups()[0].DeleteNodes(context.Background(), []*v1.Node{nodeOf(member("gpu", "gpu-0", 0))})
			},
			wantClass: cloudprovider.OtherErrorClass, wantCode: "Internal", wantMsg: "instance locked"},
		{name: "unimplemented options are the defaults' sign", method: "NodeGroupGetOptions", fault: status.Error(codes.Unimplemented, "no options"),
			do: func(p cloudprovider.Provider) error {
				_, err := p.NodeGroups()[0].GetOptions(cloudprovider.NodeGroupOptions{})
				return err
			},
			wantNotImpl: true},
		{name: "CA's service without options for the group", method: "NodeGroupGetOptions", fault: status.Error(codes.Unknown, "GetOptions not implemented"),
			do: func(p cloudprovider.Provider) error {
				_, err := p.NodeGroups()[0].GetOptions(cloudprovider.NodeGroupOptions{})
				return err
			},
			wantNotImpl: true},
		{name: "a failed Refresh", method: "NodeGroups", fault: status.Error(codes.Unavailable, "restarting"),
			do: func(p cloudprovider.Provider) error {
				err := p.Refresh(context.Background())
				if len(p.NodeGroups()) != 0 {
					return errors.New("groups left after a failed Refresh")
				}
				return err
			},
			wantClass: cloudprovider.OtherErrorClass, wantCode: "Unavailable", wantMsg: "NodeGroups: service unreachable: restarting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, providertest.NodeGroups(), Options{}, egrpc.Options{}, member("gpu", "gpu-0", 8)...)
			e.service.SetFault(tt.method, tt.fault)
			err := tt.do(e.p)
			if tt.wantNotImpl {
				if !errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatalf("error %v, want ErrNotImplemented", err)
				}
				return
			}
			var pe *cloudprovider.Error
			if !errors.As(err, &pe) || pe.Class != tt.wantClass || pe.Code != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error %v, want class %s code %s with %q", err, tt.wantClass, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// A group the service describes with impossible bounds fails the loop's
// Refresh, naming the group and both bounds, and leaves no groups.
func TestBadBoundsFromTheService(t *testing.T) {
	bad := pool("upside-down", false)
	bad.Spec.MinSize, bad.Spec.MaxSize = 3, 1
	client := fake.NewClientset()
	lp, err := local.New(local.Options{Client: client, Groups: []*nodegroup.NodeGroup{bad}})
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := New(lp, Options{}).Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	conn, err := (&egrpc.Config{Address: addr}).Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	p, err := egrpc.New(egrpc.Options{Client: protos.NewCloudProviderClient(conn), Kube: client})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Refresh(context.Background())
	const want = "node group upside-down has minSize 3 and maxSize 1; want 0 <= minSize <= maxSize"
	if err == nil || !strings.Contains(err.Error(), want) || len(p.NodeGroups()) != 0 {
		t.Errorf("Refresh: %v, %d groups; want %q and none", err, len(p.NodeGroups()), want)
	}
}

// A template copied from a member serves, for --node-info-cache-expire-time,
// the loops in which no member is fit to copy (here: the member turned
// unready and its driver's slices are gone); without the cache the
// service's template, which has no slices, is all there is.
func TestTemplateCopyOutlivesTheMember(t *testing.T) {
	for _, tt := range []struct {
		name        string
		expiry      time.Duration
		wantDevices int
	}{
		{name: "kept", expiry: time.Hour, wantDevices: 3},
		{name: "no cache", expiry: 0, wantDevices: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, []*nodegroup.NodeGroup{poolWithoutSlices("p", false)}, Options{}, egrpc.Options{TemplateCacheExpiry: tt.expiry},
				member("p", "p-0", 3)...)
			if _, got, err := e.p.NodeGroups()[0].TemplateNodeInfo(); err != nil || len(got) != 1 || len(got[0].Spec.Devices) != 3 {
				t.Fatalf("template from the member: %d slices, %v", len(got), err)
			}
			n, err := e.client.CoreV1().Nodes().Get(ctx, "p-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Conditions[0].Status = v1.ConditionFalse
			if _, err := e.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			slices, err := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range slices.Items {
				if err := e.client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			node, got, err := e.p.NodeGroups()[0].TemplateNodeInfo()
			if err != nil || node == nil {
				t.Fatalf("template: %v, %v", node, err)
			}
			if n, _ := devices(got); n != tt.wantDevices {
				t.Errorf("template after the member went unready has %d devices, want %d", n, tt.wantDevices)
			}
		})
	}
}
