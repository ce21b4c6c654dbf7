package scaleup

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// Pods each with a one-GPU claim of their own (named, generated from a
// template, or from a template not generated yet) plan like pods asking
// example.com/gpu: ceil(N/8) 8-GPU nodes, and each placement lists the
// device its own claim holds, on its own node.
func TestPlanOwnClaims(t *testing.T) {
	cases := []struct {
		name string
		pod  func(i int, snap *snapshot.Snapshot) *v1.Pod
	}{
		{name: "named claims", pod: func(i int, snap *snapshot.Snapshot) *v1.Pod {
			name := fmt.Sprintf("job-%d", i)
			snap.SetResourceClaim(fx.Claim(name+"-gpu", "gpu.example.com", 1))
			return fx.WithClaim(fx.Pod(name, 100, nil), "gpu", name+"-gpu")
		}},
		{name: "named, generated and not generated", pod: func(i int, snap *snapshot.Snapshot) *v1.Pod {
			name := fmt.Sprintf("job-%d", i)
			switch i % 3 {
			case 0:
				snap.SetResourceClaim(fx.Claim(name+"-gpu", "gpu.example.com", 1))
				return fx.WithClaim(fx.Pod(name, 100, nil), "gpu", name+"-gpu")
			case 1:
				p := fx.WithTemplateClaim(fx.Pod(name, 100, nil), "gpu", "one-gpu")
				p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(name + "-gpu")}}
				c := fx.Claim(name+"-gpu", "gpu.example.com", 1)
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
				snap.SetResourceClaim(c)
				return p
			default:
				return fx.WithTemplateClaim(fx.Pod(name, 100, nil), "gpu", "one-gpu")
			}
		}},
	}
	for _, tc := range cases {
		for _, n := range []int{8, 50, 200} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				snap := snapshot.New()
				// The template asks what the named claims ask: all pods are alike.
				snap.SetResourceClaimTemplate(fx.ClaimTemplate("one-gpu", "gpu.example.com", 1))
				var pending []*v1.Pod
				for i := 0; i < n; i++ {
					pending = append(pending, tc.pod(i, snap))
				}
				p := newPlanner(t, snap, draGroup("gpu", 8, 1000))
				plan, err := p.Plan(pending)
				if err != nil {
					t.Fatal(err)
				}
				if want := (n + 7) / 8; len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != want || len(plan.NoScaleUp) != 0 {
					t.Fatalf("scale-ups %+v, %d pods left out; want one of %d nodes", plan.ScaleUps, len(plan.NoScaleUp), want)
				}
				devices := map[string]string{}
				for _, pl := range plan.ScaleUps[0].Placements {
					placed, _, ok := p.Engine.Snapshot().Pod(pl.Pod.UID)
					if !ok {
						t.Fatalf("pod %s is not in the snapshot", pl.Pod.Name)
					}
					claims := p.Engine.ClaimsOf(placed)
					if len(claims) != 1 || claims[0].Status.Allocation == nil {
						t.Fatalf("pod %s: claims %v, want its own, allocated", pl.Pod.Name, claims)
					}
					c := claims[0]
					if c.Name != pl.Pod.Name+"-gpu" && !metav1.IsControlledBy(c, placed) {
						t.Errorf("pod %s holds claim %s, neither its named nor its generated claim", pl.Pod.Name, c.Name)
					}
					if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != pl.Pod.UID {
						t.Errorf("pod %s: claim %s reserved for %+v", pl.Pod.Name, c.Name, c.Status.ReservedFor)
					}
					r := c.Status.Allocation.Devices.Results[0]
					want := fmt.Sprintf("%s/%s/%s", r.Driver, r.Pool, r.Device)
					if r.Pool != pl.Node || len(pl.Devices) != 1 || pl.Devices[0] != want {
						t.Errorf("pod %s on %s lists devices %v; its claim %s holds %s", pl.Pod.Name, pl.Node, pl.Devices, c.Name, want)
					}
					if other, ok := devices[want]; ok {
						t.Errorf("device %s planned for %s and %s", want, other, pl.Pod.Name)
					}
					devices[want] = pl.Pod.Name
				}
				if len(devices) != n {
					t.Errorf("%d devices planned for %d pods", len(devices), n)
				}
			})
		}
	}
}
