package clusterstate

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/liveview"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/view"
)

// informerView serves objs through synced informers, with the client to
// change them.
func informerView(t *testing.T, objs ...runtime.Object) (context.Context, *fake.Clientset, view.View) {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	l := liveview.FromInformers(f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return ctx, client, l
}

// waitFor polls until seen, at most 10 s.
func waitFor(t *testing.T, what string, seen func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !seen(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("informer never saw %s", what)
		}
	}
}

// A claim the scheduler allocated and reserved for a pod between two
// loops makes the pod one being bound in the next loop, not one to plan:
// what the last loop read of the claims is not reused for changed ones.
func TestChangedClaimSeenNextLoop(t *testing.T) {
	pod := fx.WithClaim(pending("waiting-claim", true, false), "gpu", "claim")
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("claim")}}
	claim := fx.Claim("claim", "gpu.example.com", 1)
	claim.ResourceVersion = "1" // as an API server's: what loops may reuse
	ctx, client, l := informerView(t, pod, claim)
	r := NewRegistry(RegistryConfig{})
	for range 2 { // the second loop reads the same claim objects again
		st, err := readState(r, l, fakeProvider{})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Unschedulable) != 1 {
			t.Fatalf("unschedulable = %v, want the pod whose claim is not allocated", st.Unschedulable)
		}
	}
	reserved := claim.DeepCopy()
	reserved.ResourceVersion = "2"
	reserved.Status.Allocation = &resourceapi.AllocationResult{}
	reserved.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, reserved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reserved claim", func() bool {
		c, err := l.Claims.ResourceClaims(claim.Namespace).Get(claim.Name)
		return err == nil && c.Status.Allocation != nil
	})
	st, err := readState(r, l, fakeProvider{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unschedulable) != 0 {
		t.Errorf("unschedulable = %v after its claim was reserved for it, want none: the pod is being bound", st.Unschedulable)
	}
}
