package local

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/cloudprovider/providertest"
)

// The contract holds for both kinds of local groups: Node objects made by
// the provider, and machines a Launcher starts (the only kind with
// unregistered capacity, so the only one DecreaseTargetSize applies to).
func TestProviderContract(t *testing.T) {
	for _, tc := range []struct {
		name      string
		launcher  func() Launcher
		informers bool
	}{
		{name: "node objects", launcher: func() Launcher { return nil }},
		{name: "node objects, read from informers", launcher: func() Launcher { return nil }, informers: true},
		{name: "launched machines", launcher: func() Launcher { return &fakeLauncher{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			providertest.Run(t, func(t *testing.T) *providertest.Env {
				ctx := context.Background()
				client := fake.NewClientset(member("gpu", "gpu-0"))
				opts := Options{Client: client, Groups: providertest.NodeGroups(), Launcher: tc.launcher()}
				var p *Provider
				settle := func(ctx context.Context) error { return p.Refresh(ctx) }
				if tc.informers {
					p = withInformers(t, client, opts)
					settle = func(ctx context.Context) error { return settleInformers(ctx, client, p) }
				} else {
					p = mustNew(t, opts)
				}
				if err := p.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				m, err := client.CoreV1().Nodes().Get(ctx, "gpu-0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return &providertest.Env{Provider: p, Group: "gpu", Plain: "plain", Member: m, Settle: settle, GroupPrice: 1.25}
			})
		})
	}
}
