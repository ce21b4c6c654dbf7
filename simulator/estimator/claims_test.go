package estimator

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

const gpuClass = "gpu.example.com"

// named is an unowned pod referencing claim by name.
func named(pod, claim string) *v1.Pod {
	return fx.WithClaim(fx.Pod(pod, 100, nil), "gpu", claim)
}

// generated is an unowned pod whose claim from template "one-gpu" was
// generated as claim, named in its status.
func generated(pod, claim string) *v1.Pod {
	p := fx.WithTemplateClaim(fx.Pod(pod, 100, nil), "gpu", "one-gpu")
	p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return p
}

// ownedBy makes the pod the claim's controller, as the resourceclaim
// controller does for the claims it generates.
func ownedBy(c *resourceapi.ResourceClaim, pod *v1.Pod) *resourceapi.ResourceClaim {
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	return c
}

func allocated(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "devices", Driver: fx.Driver, Pool: "node-0", Device: "gpu-0"}}}}
	return c
}

// Pods whose own claims ask the same are one kind, whatever the claims'
// names or how they were made; a claim that is not the pod's own and
// fresh keeps its name in the key.
func TestKindsByClaimSpec(t *testing.T) {
	gen0, gen1, foreign := generated("g0", "g0-gpu-abc"), generated("g1", "g1-gpu-def"), generated("g2", "g2-gpu-ghi")
	sharer := named("sharer", "ring")
	cases := []struct {
		name string
		// a and b are compared; others are pending too (they may share a
		// claim with a or b).
		a, b   *v1.Pod
		others []*v1.Pod
		claims []*resourceapi.ResourceClaim
		alike  bool
	}{
		{name: "own named claims of one spec", a: named("a", "a-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{fx.Claim("a-gpu", gpuClass, 1), fx.Claim("b-gpu", gpuClass, 1)}, alike: true},
		{name: "own named claims, other count", a: named("a", "a-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{fx.Claim("a-gpu", gpuClass, 1), fx.Claim("b-gpu", gpuClass, 2)}},
		{name: "own named claims, other class", a: named("a", "a-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{fx.Claim("a-gpu", gpuClass, 1), fx.Claim("b-gpu", "nic.example.com", 1)}},
		{name: "claim shared with another pending pod", a: named("a", "ring"), b: named("b", "b-gpu"), others: []*v1.Pod{sharer},
			claims: []*resourceapi.ResourceClaim{fx.Claim("ring", gpuClass, 1), fx.Claim("b-gpu", gpuClass, 1)}},
		{name: "allocated claim", a: named("a", "a-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{allocated(fx.Claim("a-gpu", gpuClass, 1)), fx.Claim("b-gpu", gpuClass, 1)}},
		{name: "claim reserved for a running pod", a: named("a", "a-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{reserved(fx.Claim("a-gpu", gpuClass, 1)), fx.Claim("b-gpu", gpuClass, 1)}},
		{name: "claim not found", a: named("a", "a-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{fx.Claim("b-gpu", gpuClass, 1)}},
		{name: "generated claims of one template", a: gen0, b: gen1,
			claims: []*resourceapi.ResourceClaim{ownedBy(fx.Claim("g0-gpu-abc", gpuClass, 1), gen0), ownedBy(fx.Claim("g1-gpu-def", gpuClass, 1), gen1)}, alike: true},
		{name: "generated claim and named claim of one spec", a: gen0, b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{ownedBy(fx.Claim("g0-gpu-abc", gpuClass, 1), gen0), fx.Claim("b-gpu", gpuClass, 1)}, alike: true},
		{name: "template not generated yet and named claim of its spec",
			a: fx.WithTemplateClaim(fx.Pod("t", 100, nil), "gpu", "one-gpu"), b: named("b", "b-gpu"),
			claims: []*resourceapi.ResourceClaim{fx.Claim("b-gpu", gpuClass, 1)}, alike: true},
		{name: "generated claim owned by another pod", a: foreign, b: gen1,
			claims: []*resourceapi.ResourceClaim{ownedBy(fx.Claim("g2-gpu-ghi", gpuClass, 1), gen0), ownedBy(fx.Claim("g1-gpu-def", gpuClass, 1), gen1)}},
		{name: "allocated generated claim", a: gen0, b: gen1,
			claims: []*resourceapi.ResourceClaim{allocated(ownedBy(fx.Claim("g0-gpu-abc", gpuClass, 1), gen0)), ownedBy(fx.Claim("g1-gpu-def", gpuClass, 1), gen1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			snap.SetResourceClaimTemplate(fx.ClaimTemplate("one-gpu", gpuClass, 1))
			for _, c := range tc.claims {
				snap.SetResourceClaim(c)
			}
			pending := append([]*v1.Pod{tc.a, tc.b}, tc.others...)
			k := NewKinds(snap, pending)
			if got := k.Of(tc.a) == k.Of(tc.b); got != tc.alike {
				t.Errorf("Of(%s) == Of(%s): %v, want %v", tc.a.Name, tc.b.Name, got, tc.alike)
			}
			if got := k.Alike(tc.a) == k.Alike(tc.b); got != tc.alike {
				t.Errorf("Alike(%s) == Alike(%s): %v, want %v", tc.a.Name, tc.b.Name, got, tc.alike)
			}
			// Prepare on every core gives the same keys.
			prepared := NewKinds(snap, pending)
			prepared.Prepare(pending)
			for _, p := range pending {
				if prepared.Of(p) != k.Of(p) {
					t.Errorf("%s: Prepare's key differs from Of's", p.Name)
				}
			}
		})
	}
}

func reserved(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "running", UID: "pod-running"}}
	return c
}

// Without the claims (EquivalenceKey, zero Kinds, or a pod not among the
// pending pods given to NewKinds) claims are told apart by name.
func TestKindsWithoutClaimsTellNamedClaimsApart(t *testing.T) {
	a, b, late := named("a", "a-gpu"), named("b", "b-gpu"), named("late", "late-gpu")
	snap := snapshot.New()
	for _, n := range []string{"a-gpu", "b-gpu", "late-gpu"} {
		snap.SetResourceClaim(fx.Claim(n, gpuClass, 1))
	}
	if EquivalenceKey(a) == EquivalenceKey(b) {
		t.Error("EquivalenceKey: pods naming different claims share a key")
	}
	var zero Kinds
	if zero.Of(a) == zero.Of(b) {
		t.Error("zero Kinds: pods naming different claims share a key")
	}
	k := NewKinds(snap, []*v1.Pod{a, b})
	if k.Of(a) != k.Of(b) {
		t.Fatal("NewKinds: own claims of one spec must share a key, or this test checks nothing")
	}
	if k.Of(late) == k.Of(a) {
		t.Error("a pod NewKinds was not given shares a key: its claim may be shared with a pod it never saw")
	}
}

// N unowned pods, each naming its own one-GPU claim, fill 8-GPU nodes as
// pods asking example.com/gpu do: ceil(N/8) nodes, and each pod's own
// claim holds the devices on the pod's node, reserved for it.
func TestOwnNamedClaimsPackLikeExtendedResources(t *testing.T) {
	for _, n := range []int{8, 20, 64} {
		for _, countOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d pods/countOnly=%v", n, countOnly), func(t *testing.T) {
				h := newEngine(t)
				snap := h.Snapshot()
				var pending []*v1.Pod
				for i := 0; i < n; i++ {
					p := named(fmt.Sprintf("job-%d", i), fmt.Sprintf("job-%d-gpu", i))
					snap.SetResourceClaim(fx.Claim(fmt.Sprintf("job-%d-gpu", i), gpuClass, 1))
					pending = append(pending, p)
				}
				kinds := NewKinds(snap, pending)
				res, err := (&BinPacking{Engine: h, Namer: namer, Kinds: kinds, CountOnly: countOnly}).Estimate(group("gpu", 64, 8, 0), pending, 100)
				if err != nil {
					t.Fatal(err)
				}
				if want := (n + 7) / 8; len(res.NewNodes) != want || len(res.Placed) != n || len(res.Unplaced) != 0 {
					t.Fatalf("%d new nodes, %d pods placed, %d left out; want %d nodes, all placed", len(res.NewNodes), len(res.Placed), len(res.Unplaced), want)
				}
				if countOnly {
					return // counted nodes hold no placements
				}
				taken := map[string]string{}
				for _, p := range pending {
					node := res.Placed[p.UID]
					c := snap.ResourceClaim("default", p.Name+"-gpu")
					if c == nil || c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
						t.Fatalf("pod %s on %s: its claim is %+v, want one device allocated", p.Name, node, c)
					}
					r := c.Status.Allocation.Devices.Results[0]
					if r.Pool != node {
						t.Errorf("pod %s on %s: its claim holds device %s of pool %s", p.Name, node, r.Device, r.Pool)
					}
					if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID {
						t.Errorf("pod %s: its claim is reserved for %+v", p.Name, c.Status.ReservedFor)
					}
					dev := r.Pool + "/" + r.Device
					if other, ok := taken[dev]; ok {
						t.Errorf("device %s given to %s and %s", dev, other, p.Name)
					}
					taken[dev] = p.Name
				}
			})
		}
	}
}
