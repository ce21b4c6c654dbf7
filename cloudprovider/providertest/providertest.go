// Package providertest is the contract every cloud provider shows, as one
// table of behaviours: each provider's tests run it over a fresh provider
// per row (local and fake providers in their unit tests; providers that
// need a control plane in their end-to-end suites).
package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// Env is a provider set up for one row: group Group has min size 1, max
// size 3 and one registered, Ready member, template slices with 8 devices
// and the override cluster.x-k8s.io/autoscaling-options-scaledownunneededtime: 5m;
// group Plain has no overrides.
type Env struct {
	Provider cloudprovider.Provider
	Group    string
	Plain    string
	// Member is Group's registered node.
	Member *v1.Node
	// Settle makes the provider's changes visible to its reads (a Refresh
	// for most providers).
	Settle func(ctx context.Context) error
	// GroupPrice is Group's node price per hour where the provider reads
	// one (NodeGroups' gpu group has 1.25); 0 when it has none to read.
	GroupPrice float64
}

// Setup builds a fresh Env.
type Setup func(t *testing.T) *Env

// Run runs every row of the contract over providers built by setup.
func Run(t *testing.T, setup Setup) {
	for _, row := range rows() {
		t.Run(row.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			e := setup(t)
			row.check(ctx, t, e)
		})
	}
}

type row struct {
	name  string
	check func(ctx context.Context, t *testing.T, e *Env)
}

func group(t *testing.T, e *Env, id string) cloudprovider.NodeGroup {
	t.Helper()
	for _, g := range e.Provider.NodeGroups() {
		if g.Id() == id {
			return g
		}
	}
	t.Fatalf("no node group %s among %d", id, len(e.Provider.NodeGroups()))
	return nil
}

func target(ctx context.Context, t *testing.T, e *Env, id string) int {
	t.Helper()
	if err := e.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := group(t, e, id).TargetSize()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func stranger() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stranger"}, Spec: v1.NodeSpec{ProviderID: "other-cloud:///stranger"}}
}

func rows() []row {
	return []row{
		{"min, max and target size", func(ctx context.Context, t *testing.T, e *Env) {
			g := group(t, e, e.Group)
			if g.MinSize() != 1 || g.MaxSize() != 3 || target(ctx, t, e, e.Group) != 1 {
				t.Errorf("min %d max %d target %d, want 1 3 1", g.MinSize(), g.MaxSize(), target(ctx, t, e, e.Group))
			}
		}},
		{"IncreaseSize grows the target", func(ctx context.Context, t *testing.T, e *Env) {
			if err := group(t, e, e.Group).IncreaseSize(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if got := target(ctx, t, e, e.Group); got != 3 {
				t.Errorf("target after +2 = %d, want 3", got)
			}
		}},
		{"IncreaseSize above max refused, typed", func(ctx context.Context, t *testing.T, e *Env) {
			err := group(t, e, e.Group).IncreaseSize(ctx, 3)
			var pe *cloudprovider.Error
			if !errors.As(err, &pe) || pe.Code != cloudprovider.CodeMaxSizeExceeded {
				t.Errorf("IncreaseSize(3) at 1 of max 3: %v, want a %s error", err, cloudprovider.CodeMaxSizeExceeded)
			}
			if got := target(ctx, t, e, e.Group); got != 1 {
				t.Errorf("target after a refused increase = %d, want 1", got)
			}
		}},
		{"AtomicIncreaseSize adds all the nodes (or IncreaseSize does, where not implemented)", func(ctx context.Context, t *testing.T, e *Env) {
			atomic, err := cloudprovider.IncreaseAtomically(ctx, group(t, e, e.Group), 2)
			if err != nil {
				t.Fatalf("atomic increase (atomic=%v): %v", atomic, err)
			}
			if got := target(ctx, t, e, e.Group); got != 3 {
				t.Errorf("target after an atomic +2 = %d, want 3", got)
			}
		}},
		{"AtomicIncreaseSize above max adds none, typed", func(ctx context.Context, t *testing.T, e *Env) {
			err := group(t, e, e.Group).AtomicIncreaseSize(ctx, 3)
			if errors.Is(err, cloudprovider.ErrNotImplemented) {
				return // the fallback's refusal is IncreaseSize's row
			}
			var pe *cloudprovider.Error
			if !errors.As(err, &pe) || pe.Code != cloudprovider.CodeMaxSizeExceeded {
				t.Errorf("AtomicIncreaseSize(3) at 1 of max 3: %v, want a %s error", err, cloudprovider.CodeMaxSizeExceeded)
			}
			if got := target(ctx, t, e, e.Group); got != 1 {
				t.Errorf("target after a refused atomic increase = %d, want 1 (none of the nodes)", got)
			}
		}},
		{"IncreaseSize of zero refused", func(ctx context.Context, t *testing.T, e *Env) {
			if err := group(t, e, e.Group).IncreaseSize(ctx, 0); err == nil {
				t.Error("IncreaseSize(0) succeeded")
			}
		}},
		{"DeleteNodes never below min", func(ctx context.Context, t *testing.T, e *Env) {
			if err := group(t, e, e.Group).DeleteNodes(ctx, []*v1.Node{e.Member}); err == nil {
				t.Error("deleting the only member of a group of min 1 succeeded")
			}
			if got := target(ctx, t, e, e.Group); got != 1 {
				t.Errorf("target = %d, want 1", got)
			}
		}},
		{"DeleteNodes of a member shrinks the target", func(ctx context.Context, t *testing.T, e *Env) {
			if err := group(t, e, e.Group).IncreaseSize(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := e.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			if err := group(t, e, e.Group).DeleteNodes(ctx, []*v1.Node{e.Member}); err != nil {
				t.Fatal(err)
			}
			if got := target(ctx, t, e, e.Group); got != 1 {
				t.Errorf("target after deleting 1 of 2 = %d, want 1", got)
			}
		}},
		{"DeleteNodes of a stranger refused", func(ctx context.Context, t *testing.T, e *Env) {
			if err := group(t, e, e.Group).IncreaseSize(ctx, 1); err != nil {
				t.Fatal(err)
			}
			before := target(ctx, t, e, e.Group)
			if err := group(t, e, e.Group).DeleteNodes(ctx, []*v1.Node{stranger()}); err == nil {
				t.Error("deleting a node of no group succeeded")
			}
			if got := target(ctx, t, e, e.Group); got != before {
				t.Errorf("target = %d, want %d", got, before)
			}
		}},
		{"DecreaseTargetSize takes a negative delta, unregistered nodes only", func(ctx context.Context, t *testing.T, e *Env) {
			g := group(t, e, e.Group)
			if err := g.DecreaseTargetSize(ctx, 1); err == nil {
				t.Error("DecreaseTargetSize(+1) succeeded: the delta is negative")
			}
			err := g.DecreaseTargetSize(ctx, -1)
			if err == nil {
				t.Error("DecreaseTargetSize(-1) with no unregistered node succeeded: registered nodes are never given up")
			} else if errors.Is(err, cloudprovider.ErrNotImplemented) {
				return
			}
			if got := target(ctx, t, e, e.Group); got != 1 {
				t.Errorf("target = %d, want 1", got)
			}
		}},
		{"DecreaseTargetSize gives back an unregistered instance", func(ctx context.Context, t *testing.T, e *Env) {
			g := group(t, e, e.Group)
			if err := g.IncreaseSize(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := e.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			in, err := group(t, e, e.Group).Nodes()
			if err != nil {
				t.Fatal(err)
			}
			creating := 0
			for _, i := range in {
				if i.ProviderID != e.Member.Spec.ProviderID && (i.Status == nil || i.Status.State == cloudprovider.InstanceCreating) {
					creating++
				}
			}
			if creating == 0 {
				// New nodes register at once (Node objects made by the
				// provider): there is never unregistered capacity.
				return
			}
			if err := group(t, e, e.Group).DecreaseTargetSize(ctx, -1); err != nil {
				t.Fatalf("DecreaseTargetSize(-1) with %d unregistered instance(s): %v", creating, err)
			}
			if got := target(ctx, t, e, e.Group); got != 1 {
				t.Errorf("target = %d after giving the unregistered instance back, want 1", got)
			}
		}},
		{"NodeGroupForNode", func(_ context.Context, t *testing.T, e *Env) {
			if g, err := e.Provider.NodeGroupForNode(e.Member); err != nil || g == nil || g.Id() != e.Group {
				t.Errorf("member: %v, %v; want group %s", g, err, e.Group)
			}
			if g, err := e.Provider.NodeGroupForNode(stranger()); err != nil || g != nil {
				t.Errorf("stranger: %v, %v; want none", g, err)
			}
			bare := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
			if g, err := e.Provider.NodeGroupForNode(bare); err != nil || g != nil {
				t.Errorf("node without providerID: %v, %v; want none", g, err)
			}
		}},
		{"Nodes lists the member", func(_ context.Context, t *testing.T, e *Env) {
			in, err := group(t, e, e.Group).Nodes()
			if err != nil {
				t.Fatal(err)
			}
			if len(in) != 1 || in[0].ProviderID != e.Member.Spec.ProviderID {
				t.Fatalf("instances %+v, want the member %s", in, e.Member.Spec.ProviderID)
			}
			if s := in[0].Status; s != nil && (s.State != cloudprovider.InstanceRunning || s.ErrorInfo != nil) {
				t.Errorf("member's status %+v, want running", s)
			}
		}},
		{"TemplateNodeInfo with slices", func(_ context.Context, t *testing.T, e *Env) {
			node, slices, err := group(t, e, e.Group).TemplateNodeInfo()
			if err != nil || node == nil {
				t.Fatalf("template: %v, %v", node, err)
			}
			devices := 0
			for _, s := range slices {
				devices += len(s.Spec.Devices)
			}
			if devices != 8 {
				t.Errorf("template slices have %d devices, want 8", devices)
			}
		}},
		{"GetOptions with and without overrides", func(_ context.Context, t *testing.T, e *Env) {
			defaults := cloudprovider.NodeGroupOptions{ScaleDownUnneededTime: 10 * time.Minute, ScaleDownUtilizationThreshold: 0.5}
			o, err := cloudprovider.OptionsOf(group(t, e, e.Group), defaults)
			if err != nil || o.ScaleDownUnneededTime != 5*time.Minute || o.ScaleDownUtilizationThreshold != 0.5 {
				t.Errorf("overridden: %+v, %v; want unneeded time 5m, the rest defaults", o, err)
			}
			o, err = cloudprovider.OptionsOf(group(t, e, e.Plain), defaults)
			if err != nil || o != defaults {
				t.Errorf("plain: %+v, %v; want the defaults", o, err)
			}
		}},
		{"NodePrice is a price >= 0 or not implemented", func(_ context.Context, t *testing.T, e *Env) {
			for _, id := range []string{e.Group, e.Plain} {
				price, err := cloudprovider.NodePrice(group(t, e, id))
				switch {
				case id == e.Group && e.GroupPrice > 0:
					if err != nil || price != e.GroupPrice {
						t.Errorf("%s: price %v, %v; want %v", id, price, err, e.GroupPrice)
					}
				case err != nil && !errors.Is(err, cloudprovider.ErrNotImplemented):
					t.Errorf("%s: %v; want a price or ErrNotImplemented", id, err)
				}
			}
		}},
		{"Refresh", func(ctx context.Context, t *testing.T, e *Env) {
			if err := e.Provider.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if len(e.Provider.NodeGroups()) != 2 {
				t.Errorf("%d groups after Refresh, want 2", len(e.Provider.NodeGroups()))
			}
		}},
	}
}

// NodeGroups are the groups the contract is run over by providers whose
// groups come from NodeGroup objects: gpu (min 1, max 3, 8 devices, a
// scale-down override, a price of 1.25 per hour) and plain.
func NodeGroups() []*nodegroup.NodeGroup {
	gpu := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu",
		Annotations: map[string]string{nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime: "5m"}},
		Spec: nodegroup.Spec{MinSize: 1, MaxSize: 3, Price: "1.25", Template: *fx.Node("t", 32, 128, nil)}}
	gpu.Spec.ResourceSlices = append(gpu.Spec.ResourceSlices, fx.GPUSlice("x", 8).Spec)
	plain := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec: nodegroup.Spec{MaxSize: 2, Template: *fx.Node("t", 8, 32, nil)}}
	return []*nodegroup.NodeGroup{gpu, plain}
}
