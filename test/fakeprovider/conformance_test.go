package fakeprovider

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/cloudprovider/providertest"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// The fake provider keeps the contract, so that the loop's failure tests
// run against a provider that behaves as real ones do.
func TestProviderContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Env {
		ctx := context.Background()
		client := fake.NewClientset()
		p := New(client, time.Now)
		gpu := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu",
			Annotations: map[string]string{nodegroup.AutoscalingOptionsPrefix + nodegroup.OptScaleDownUnneededTime: "5m"}},
			Spec: nodegroup.Spec{MinSize: 1, MaxSize: 3, Template: *fx.Node("t", 32, 128, nil)}}
		gpu.Spec.ResourceSlices = append(gpu.Spec.ResourceSlices, fx.GPUSlice("x", 8).Spec)
		g := p.AddGroup(gpu, Faults{})
		p.AddGroup(&nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
			Spec: nodegroup.Spec{MaxSize: 2, Template: *fx.Node("t", 8, 32, nil)}}, Faults{})
		if err := g.AddReadyNodes(ctx, 1); err != nil {
			t.Fatal(err)
		}
		m, err := client.CoreV1().Nodes().Get(ctx, g.Names()[0], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &providertest.Env{Provider: p, Group: "gpu", Plain: "plain", Member: m, Settle: p.Refresh}
	})
}
