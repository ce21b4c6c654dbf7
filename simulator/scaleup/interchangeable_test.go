package scaleup

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/estimator"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// existingCase is a cluster of 4-core nodes n0, n1, ... with 3 GPUs each,
// running pods placed first (on their spec.nodeName), and pending pods
// for placeOnExisting.
type existingCase struct {
	name    string
	nodes   int
	claims  []*resourceapi.ResourceClaim
	running []*v1.Pod
	pending []*v1.Pod
	// others are pending too, of other kinds.
	others []*v1.Pod
	// apart: the pods are of different kinds (estimator.Kinds.Of), so no
	// verdict is shared; otherwise they are all of one kind.
	apart bool
}

func (tc existingCase) nodeNames() []string {
	var out []string
	for i := range tc.nodes {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// planner builds the case's cluster and a planner with no node group.
func (tc existingCase) planner(t *testing.T) *Planner {
	t.Helper()
	snap := snapshot.New()
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("two-gpus", "gpu.example.com", 2))
	for _, name := range tc.nodeNames() {
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
	p := newPlanner(t, snap)
	for _, pod := range tc.running {
		pod = pod.DeepCopy()
		node := pod.Spec.NodeName
		pod.Spec.NodeName = ""
		if _, ferr := p.Engine.Place(pod, node); ferr != nil {
			t.Fatalf("running pod %s on %s: %v", pod.Name, node, ferr)
		}
	}
	return p
}

// placedOn says where each pod went ("" for nowhere).
func placedOn(p *Planner, pods []*v1.Pod) map[string]string {
	out := map[string]string{}
	for _, pod := range pods {
		_, node, _ := p.Engine.Snapshot().Pod(pod.UID)
		out[pod.Name] = node
	}
	return out
}

// placeOnExisting gives up on a kind of pod once one of it fits no
// existing node. That holds only if pods of one kind are interchangeable
// there: the plan must place every pod where the scheduler, trying each
// pod on its own over every node in queue order, would.
func TestPlaceOnExistingGivesUpOnlyOnInterchangeablePods(t *testing.T) {
	for _, tc := range existingCases() {
		for _, firstFit := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/firstFit=%v", tc.name, firstFit), func(t *testing.T) {
				p := tc.planner(t)
				kinds := estimator.NewKinds(p.Engine.Snapshot(), tc.pending)
				same := true
				for _, pod := range tc.pending[1:] {
					same = same && kinds.Of(pod) == kinds.Of(tc.pending[0])
				}
				if same == tc.apart {
					t.Fatalf("pods of one kind: %v, want %v", same, !tc.apart)
				}
				p.FirstFit = firstFit
				all := append(slices.Clone(tc.others), tc.pending...)
				pending := fx.ClonePods(all)
				plan, err := p.Plan(pending)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, pod := range pending {
					got[pod.Name] = ""
				}
				for _, pl := range plan.ExistingNodes {
					got[pl.Pod.Name] = pl.Node
				}

				ref := tc.planner(t)
				each := fx.ClonePods(all)
				nodes, last := tc.nodeNames(), ""
				for _, pod := range SortSchedulerQueue(each) {
					if firstFit {
						// From the node the last pod went to on, as first fit searches.
						start := max(slices.Index(nodes, last), 0)
						if node, _, ferr := ref.Engine.PlaceOnAnyNode(pod, append(slices.Clone(nodes[start:]), nodes[:start]...)); ferr == nil {
							last = node
						}
						continue
					}
					_, _, _ = ref.Engine.PlaceBest(pod, nodes)
				}
				want := placedOn(ref, each)
				if !maps.Equal(got, want) {
					t.Errorf("placed %v; each pod tried on every node %v", got, want)
				}
				if !slices.Contains(slices.Collect(maps.Values(want)), "") {
					t.Errorf("every pod fits (%v): the case tests no giving up", want)
				}
			})
		}
	}
}

// ofStatefulSet makes the pod one of StatefulSet name's, labelled as its
// controller labels them (app=name and the pod's own name).
func ofStatefulSet(p *v1.Pod, name string) *v1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name,
		UID: types.UID("sts-" + name), Controller: ptr.To(true)}}
	p.Labels = map[string]string{"app": name, "statefulset.kubernetes.io/pod-name": p.Name}
	return p
}

// spread keeps pods labelled key=value within a skew of one across nodes.
func spread(p *v1.Pod, key, value string) *v1.Pod {
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname,
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}}
	return p
}

// allocatedOn makes the claim allocated one GPU of node's, as the
// scheduler leaves a claim it allocated for a pod that then failed.
func allocatedOn(c *resourceapi.ResourceClaim, node string) *resourceapi.ResourceClaim {
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: c.Spec.Devices.Requests[0].Name, Driver: fx.Driver, Pool: node, Device: "gpu-0"}}},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	return c
}

func existingCases() []existingCase {
	web := func(name string) *v1.Pod { return ownedBy(fx.Pod(name, 100, nil), "web") }
	// A pod taking a node's every core.
	hog := func(node string) *v1.Pod { return fx.RunningOn(fx.Pod("hog-"+node, 4000, nil), node) }

	var ownClaims []*resourceapi.ResourceClaim
	var ownClaimPods, templatePods []*v1.Pod
	for i := range 3 {
		// Each pod's claim of its own asks 2 of a node's 3 GPUs.
		c := fx.Claim(fmt.Sprintf("own-%d", i), "gpu.example.com", 2)
		ownClaims = append(ownClaims, c)
		ownClaimPods = append(ownClaimPods, fx.WithClaim(fx.Pod(fmt.Sprintf("p%d", i), 100, nil), "gpu", c.Name))
		templatePods = append(templatePods, fx.WithTemplateClaim(web(fmt.Sprintf("p%d", i)), "gpu", "two-gpus"))
	}
	// Claims of their own already allocated, each on its own node, p0's
	// on n0, which has no core left.
	var allocated []*resourceapi.ResourceClaim
	var allocatedPods []*v1.Pod
	for i := range 2 {
		c := allocatedOn(fx.Claim(fmt.Sprintf("own-%d", i), "gpu.example.com", 1), fmt.Sprintf("n%d", i))
		allocated = append(allocated, c)
		allocatedPods = append(allocatedPods, fx.WithClaim(web(fmt.Sprintf("p%d", i)), "gpu", c.Name))
	}
	// The same from a template: the generated claims are named in the
	// pods' status.
	var generated []*resourceapi.ResourceClaim
	var generatedPods []*v1.Pod
	for i := range 2 {
		p := fx.WithTemplateClaim(web(fmt.Sprintf("p%d", i)), "gpu", "two-gpus")
		name := p.Name + "-gpu-x7k2q"
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(name)}}
		c := allocatedOn(fx.Claim(name, "gpu.example.com", 1), fmt.Sprintf("n%d", i))
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
		generated = append(generated, c)
		generatedPods = append(generatedPods, p)
	}
	// A StatefulSet's volumeClaimTemplates: a volume claim per pod.
	perPodPVC := func(i int) *v1.Pod {
		p := ofStatefulSet(fx.Pod(fmt.Sprintf("db-%d", i), 100, nil), "db")
		return fx.WithVolume(p, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + p.Name}}})
	}
	ephemeral := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	return []existingCase{
		{name: "claims of their own asking alike", nodes: 1, claims: ownClaims, pending: ownClaimPods},
		{name: "claims of their own from a template", nodes: 1, pending: templatePods},
		{name: "claims of their own allocated on different nodes", nodes: 2, apart: true, claims: allocated,
			running: []*v1.Pod{hog("n0")}, pending: allocatedPods},
		{name: "generated claims allocated on different nodes", nodes: 2, apart: true, claims: generated,
			running: []*v1.Pod{hog("n0")}, pending: generatedPods},
		// The snapshot holds no PersistentVolumeClaims: a pod with a volume
		// claim fits nowhere (VolumeRestrictions: not found; an ephemeral
		// one waits for its claim). Claims of their own are told apart by
		// name all the same, so claims bound apart could not share a verdict.
		{name: "volume claims of their own", nodes: 1, apart: true, pending: []*v1.Pod{perPodPVC(0), perPodPVC(1)}},
		{name: "ephemeral volumes", nodes: 1, pending: []*v1.Pod{fx.WithVolume(web("p0"), ephemeral), fx.WithVolume(web("p1"), ephemeral)}},
		{name: "host ports", nodes: 2, pending: []*v1.Pod{fx.WithHostPort(web("p0"), "", 8080), fx.WithHostPort(web("p1"), "", 8080),
			fx.WithHostPort(web("p2"), "", 8080)}},
		// A port taken on one host IP is free on another.
		{name: "bare pods a running pod's host port tells apart by host IP", nodes: 1, apart: true,
			running: []*v1.Pod{fx.RunningOn(fx.WithHostPort(fx.Pod("guard", 100, nil), "10.0.0.1", 8080), "n0")},
			pending: []*v1.Pod{fx.WithHostPort(fx.Pod("pa", 100, nil), "10.0.0.1", 8080), fx.WithHostPort(fx.Pod("pb", 100, nil), "10.0.0.2", 8080)}},
		{name: "anti-affinity to their own kind", nodes: 2, pending: []*v1.Pod{
			fx.WithPodAntiAffinity(fx.WithLabels(web("p0"), map[string]string{"app": "web"}), "app", "web"),
			fx.WithPodAntiAffinity(fx.WithLabels(web("p1"), map[string]string{"app": "web"}), "app", "web"),
			fx.WithPodAntiAffinity(fx.WithLabels(web("p2"), map[string]string{"app": "web"}), "app", "web")}},

		// Labels are not in the kind; below, something selects on labels
		// that differ within it.
		{name: "bare pods a running pod's anti-affinity tells apart by label", nodes: 1,
			running: []*v1.Pod{fx.RunningOn(fx.WithPodAntiAffinity(fx.Pod("guard", 100, nil), "team", "a"), "n0")},
			pending: []*v1.Pod{fx.WithLabels(fx.Pod("pa", 100, nil), map[string]string{"team": "a"}),
				fx.WithLabels(fx.Pod("pb", 100, nil), map[string]string{"team": "b"})}},
		{name: "a StatefulSet's pods a running pod's anti-affinity tells apart by pod name", nodes: 1,
			running: []*v1.Pod{fx.RunningOn(fx.WithPodAntiAffinity(fx.Pod("guard", 100, nil), "statefulset.kubernetes.io/pod-name", "db-0"), "n0")},
			pending: []*v1.Pod{ofStatefulSet(fx.Pod("db-0", 100, nil), "db"), ofStatefulSet(fx.Pod("db-1", 100, nil), "db")}},
		// The guard is pending too, placed first (higher priority).
		{name: "a pending pod's anti-affinity tells a ReplicaSet's pods apart", nodes: 1,
			others:  []*v1.Pod{prioritized(fx.WithPodAntiAffinity(fx.Pod("guard", 100, nil), "shard", "0"), 10)},
			pending: []*v1.Pod{fx.WithLabels(web("p0"), map[string]string{"shard": "0"}), fx.WithLabels(web("p1"), map[string]string{"shard": "1"})}},
		// The first pod of a group may go anywhere when it matches its
		// own affinity term; a pod of the same spec that does not waits.
		{name: "affinity only one of them matches itself", nodes: 1,
			pending: []*v1.Pod{fx.WithPodAffinity(fx.WithLabels(web("pa"), map[string]string{"app": "other"}), "app", "web"),
				fx.WithPodAffinity(fx.WithLabels(web("pb"), map[string]string{"app": "web"}), "app", "web")}},
		// A pod its spread constraint selects counts itself: on n0, which
		// runs one leader and n1 none (n1 has no core left), a leader
		// would make the skew 2, a follower keeps it 1.
		{name: "spreading counts only the pods it selects", nodes: 2,
			running: []*v1.Pod{hog("n1"), fx.RunningOn(fx.WithLabels(fx.Pod("leader", 100, nil), map[string]string{"role": "leader"}), "n0")},
			pending: []*v1.Pod{spread(fx.WithLabels(web("pa"), map[string]string{"role": "leader"}), "role", "leader"),
				spread(fx.WithLabels(web("pb"), map[string]string{"role": "follower"}), "role", "leader")}},
	}
}

func prioritized(p *v1.Pod, priority int32) *v1.Pod {
	p.Spec.Priority = ptr.To(priority)
	return p
}
