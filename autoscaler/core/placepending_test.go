package core

import (
	"context"
	"fmt"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/simulator/estimator"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// pendingCase is a cluster of 4-core nodes n0, n1, ... with 3 GPUs each,
// running pods placed first (on their spec.nodeName), and pending pods
// that the equivalence classes of scale-up all hold to be of one kind.
type pendingCase struct {
	name    string
	nodes   int
	claims  []*resourceapi.ResourceClaim
	running []*v1.Pod
	pending []*v1.Pod
}

// build makes the case's placement engine.
func (tc pendingCase) build(t *testing.T) *placement.Engine {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	for i := range tc.nodes {
		name := fmt.Sprintf("n%d", i)
		if err := snap.AddNode(fx.Node(name, 4, 64, nil)); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(name, 3)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range tc.claims {
		snap.SetResourceClaim(c.DeepCopy())
	}
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tc.running {
		p = p.DeepCopy()
		node := p.Spec.NodeName
		p.Spec.NodeName = ""
		if _, ferr := eng.Place(p, node); ferr != nil {
			t.Fatalf("running pod %s on %s: %v", p.Name, node, ferr)
		}
	}
	return eng
}

// placedNodes says, by pending pod name, the node it was placed on ("" for
// none).
func (tc pendingCase) placedNodes(eng *placement.Engine, pending []*v1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pending {
		_, node, _ := eng.Snapshot().Pod(p.UID)
		out[p.Name] = node
	}
	return out
}

func (tc pendingCase) nodeNames() []string {
	var out []string
	for i := range tc.nodes {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// Before scale-down, placePendingPods gives up on a kind of pod after one
// of it fits nowhere. That holds only if pods of one kind are
// interchangeable there: each pod placed on its own, tried on every node,
// must end where placePendingPods leaves it, or a node a pending pod
// could use looks unneeded and is removed under it.
func TestPlacePendingPodsGivesUpOnlyOnInterchangeablePods(t *testing.T) {
	for _, tc := range pendingCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.build(t)
			kinds := estimator.NewKinds(h.Snapshot(), tc.pending)
			for _, p := range tc.pending[1:] {
				if kinds.Of(p) != kinds.Of(tc.pending[0]) {
					t.Fatalf("pods %s and %s are of different kinds: the case tests nothing", tc.pending[0].Name, p.Name)
				}
			}
			ready := map[string]bool{}
			for _, n := range tc.nodeNames() {
				ready[n] = true
			}
			a := &Autoscaler{sd: newScaleDownState()}
			pending := fx.ClonePods(tc.pending)
			a.placePendingPods(h, &clusterstate.State{Unschedulable: pending, Ready: ready})
			got := tc.placedNodes(h, pending)

			ref := tc.build(t)
			each := fx.ClonePods(tc.pending)
			for _, p := range each {
				_, _, _ = ref.PlaceOnAnyNode(p, tc.nodeNames())
			}
			want := tc.placedNodes(ref, each)
			if !maps.Equal(got, want) {
				t.Errorf("placed %v, each pod tried on every node %v", got, want)
			}
		})
	}
}

// ownedBy makes pods of one ReplicaSet; labels are the pod's own.
func ownedBy(p *v1.Pod, labels map[string]string) *v1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptr.To(true)}}
	p.Labels = labels
	return p
}

func pendingCases() []pendingCase {
	var ownClaims []*resourceapi.ResourceClaim
	var ownClaimPods []*v1.Pod
	for i := range 3 {
		// Each pod's claim of its own asks 2 of a node's 3 GPUs.
		c := fx.Claim(fmt.Sprintf("own-%d", i), "gpu.example.com", 2)
		ownClaims = append(ownClaims, c)
		ownClaimPods = append(ownClaimPods, fx.WithClaim(fx.Pod(fmt.Sprintf("p%d", i), 100, nil), "gpu", c.Name))
	}
	pvc := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}
	ephemeral := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	web := map[string]string{"app": "web"}
	statefulPod := func(i int) *v1.Pod {
		p := fx.Pod(fmt.Sprintf("db-%d", i), 100, nil)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-db", Controller: ptr.To(true)}}
		p.Labels = map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": p.Name}
		return p
	}
	return []pendingCase{
		{name: "claims of their own asking alike", nodes: 1, claims: ownClaims, pending: ownClaimPods},
		{name: "one shared claim", nodes: 2, claims: []*resourceapi.ResourceClaim{fx.Claim("shared", "gpu.example.com", 3)},
			pending: []*v1.Pod{fx.WithClaim(fx.Pod("p0", 3000, nil), "gpu", "shared"), fx.WithClaim(fx.Pod("p1", 3000, nil), "gpu", "shared")}},
		{name: "one volume claim", nodes: 1, pending: []*v1.Pod{fx.WithVolume(fx.Pod("p0", 100, nil), pvc), fx.WithVolume(fx.Pod("p1", 100, nil), pvc)}},
		{name: "ephemeral volumes", nodes: 1, pending: []*v1.Pod{fx.WithVolume(fx.Pod("p0", 100, nil), ephemeral), fx.WithVolume(fx.Pod("p1", 100, nil), ephemeral)}},
		{name: "host ports", nodes: 2, pending: []*v1.Pod{fx.WithHostPort(fx.Pod("p0", 100, nil), "", 8080), fx.WithHostPort(fx.Pod("p1", 100, nil), "", 8080),
			fx.WithHostPort(fx.Pod("p2", 100, nil), "", 8080)}},
		{name: "anti-affinity to their own kind", nodes: 2, pending: []*v1.Pod{fx.WithPodAntiAffinity(ownedBy(fx.Pod("p0", 100, nil), web), "app", "web"),
			fx.WithPodAntiAffinity(ownedBy(fx.Pod("p1", 100, nil), web), "app", "web"), fx.WithPodAntiAffinity(ownedBy(fx.Pod("p2", 100, nil), web), "app", "web")}},
		// Labels are not in the kind: a running pod's anti-affinity
		// rejects one bare pod of the spec, not the other.
		{name: "bare pods a running pod's anti-affinity tells apart by label", nodes: 1,
			running: []*v1.Pod{fx.RunningOn(fx.WithPodAntiAffinity(fx.Pod("guard", 100, nil), "team", "a"), "n0")},
			pending: []*v1.Pod{fx.WithLabels(fx.Pod("pa", 100, nil), map[string]string{"team": "a"}), fx.WithLabels(fx.Pod("pb", 100, nil), map[string]string{"team": "b"})}},
		{name: "a StatefulSet's pods a running pod's anti-affinity tells apart by pod name", nodes: 1,
			running: []*v1.Pod{fx.RunningOn(fx.WithPodAntiAffinity(fx.Pod("guard", 100, nil), "statefulset.kubernetes.io/pod-name", "db-0"), "n0")},
			pending: []*v1.Pod{statefulPod(0), statefulPod(1)}},
		// The first pod of a group may go anywhere when it matches its
		// own affinity term; a pod of the same spec that does not waits.
		{name: "affinity only one of them matches itself", nodes: 1,
			pending: []*v1.Pod{fx.WithPodAffinity(fx.WithLabels(fx.Pod("pb", 100, nil), map[string]string{"app": "other"}), "app", "web"),
				fx.WithPodAffinity(fx.WithLabels(fx.Pod("pa", 100, nil), web), "app", "web")}},
	}
}
