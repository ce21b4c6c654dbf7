package provreq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/snapshot"
)

const gpuClass = "gpu.example.com"

// request is a ProvisioningRequest in "default" with one podSet per
// (template, count) pair.
func request(name, class string, sets ...any) *prv1.ProvisioningRequest {
	pr := &prv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(fx.Epoch)},
		Spec: prv1.ProvisioningRequestSpec{ProvisioningClassName: class},
	}
	for i := 0; i+1 < len(sets); i += 2 {
		pr.Spec.PodSets = append(pr.Spec.PodSets, prv1.PodSet{PodTemplateRef: prv1.Reference{Name: sets[i].(string)}, Count: int32(sets[i+1].(int))})
	}
	return pr
}

// templates serves PodTemplates by name in "default".
func templates(ts ...*v1.PodTemplate) Templates {
	return func(ns, name string) *v1.PodTemplate {
		for _, t := range ts {
			if t.Namespace == ns && t.Name == name {
				return t
			}
		}
		return nil
	}
}

func podTemplate(name string, pod *v1.Pod) *v1.PodTemplate {
	return &v1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}}, Spec: pod.Spec}}
}

// extendedTemplate asks for one DRA-backed example.com/gpu;
// claimTemplate for one GPU through a ResourceClaimTemplate.
func extendedTemplate() *v1.PodTemplate {
	return podTemplate("extended", fx.Pod("x", 500, fx.GPUs(fx.GPUResource, 1)))
}

func claimTemplate() *v1.PodTemplate {
	return podTemplate("claims", fx.WithTemplateClaim(fx.Pod("x", 500, nil), "gpu", "one-gpu"))
}

// cluster is nodes of 8 GPUs each, the first used devices of them taken
// by running one-GPU pods, and a group gpu of such nodes up to maxSize.
func cluster(t *testing.T, nodes, used, maxSize int) (*scaleup.Planner, *snapshot.Snapshot) {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("one-gpu", gpuClass, 1))
	addGPUNodes(t, snap, nodes)
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < used; i++ {
		pod := fx.Pod(fmt.Sprintf("running-%d", i), 100, fx.GPUs(fx.GPUResource, 1))
		if _, _, ferr := eng.PlaceOnAnyNode(pod, snap.NodeNames()); ferr != nil {
			t.Fatalf("running pod %d: %v", i, ferr)
		}
	}
	slice := fx.GPUSlice("x", 8)
	group := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: nodegroup.Spec{MaxSize: maxSize, Template: *fx.Node("template", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{slice.Spec}}}
	exp, _ := expander.New("least-waste", nil, 1)
	return &scaleup.Planner{Engine: eng, Groups: []*nodegroup.NodeGroup{group}, Expander: exp}, snap
}

// addGPUNodes adds nodes node-<i> of the group gpu, 8 GPUs each, and
// returns their names.
func addGPUNodes(t testing.TB, snap *snapshot.Snapshot, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i)
		node := fx.Node(names[i], 64, 256, nil)
		node.Labels[nodegroup.GroupLabel] = "gpu"
		if err := snap.AddNode(node); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(names[i], 8)); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func TestPodsOfARequest(t *testing.T) {
	pr := request("job", BestEffortAtomic, "extended", 2, "claims", 1)
	pods, err := Pods(pr, templates(extendedTemplate(), claimTemplate()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if p.UID != types.UID("default/"+p.Name) || p.Annotations[ConsumeAnnotation] != "job" ||
			p.Annotations[ClassAnnotation] != BestEffortAtomic || !IsRequestPod(p) || p.Labels["job"] == "" {
			t.Errorf("pod %s: uid %s, annotations %v, owners %v, labels %v", p.Name, p.UID, p.Annotations, p.OwnerReferences, p.Labels)
		}
		if p.Spec.SchedulerName != v1.DefaultSchedulerName || !p.CreationTimestamp.Equal(&pr.CreationTimestamp) {
			t.Errorf("pod %s: scheduler %q, created %v: want the API server's defaults and the request's time", p.Name, p.Spec.SchedulerName, p.CreationTimestamp)
		}
	}
	if got := strings.Join(names, ","); got != "job-0-0,job-0-1,job-1-0" {
		t.Errorf("pods %s, want job-0-0,job-0-1,job-1-0", got)
	}
}

// Bad input names the object and the field.
func TestBadRequests(t *testing.T) {
	ts := templates(extendedTemplate(), podTemplate("bad-claims", fx.WithTemplateClaim(fx.Pod("x", 500, nil), "gpu", "nope")))
	for _, tc := range []struct {
		pr   *prv1.ProvisioningRequest
		want string
	}{
		{request("missing", CheckCapacity, "extended", 1, "nope", 2), "ProvisioningRequest default/missing: spec.podSets[1].podTemplateRef.name: PodTemplate default/nope not found"},
		{request("zero", CheckCapacity, "extended", 0), "ProvisioningRequest default/zero: spec.podSets[0].count: must be at least 1, got 0"},
		{request("empty", CheckCapacity), "spec.podSets: has 0 entries, must have 1 to 32"},
		{request("huge", CheckCapacity, "extended", MaxPods+1), "spec.podSets[*].count: the request stands for 100001 pods"},
		{request("typo", "Check_Capacity", "extended", 1), `spec.provisioningClassName: "Check_Capacity" is not a DNS subdomain`},
		{request("no-claim-template", CheckCapacity, "bad-claims", 1),
			"spec.podSets[0].podTemplateRef.name: PodTemplate default/bad-claims: template.spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate default/nope not found"},
	} {
		if _, err := Pods(tc.pr, ts); tc.pr.Name != "no-claim-template" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.pr.Name, err, tc.want)
		}
		planner, _ := cluster(t, 1, 0, 1)
		d, err := (&Decider{Planner: planner, Templates: ts}).Decide(context.Background(), tc.pr)
		if tc.pr.Name == "typo" {
			continue // never served: Serves says no before any decision
		}
		if err != nil || d.Condition.Type != prv1.Failed || d.Condition.Reason != ReasonFailedToCreatePods || !strings.Contains(d.Condition.Message, tc.want) {
			t.Errorf("%s: decision %+v (%v), want Failed/FailedToCreatePods naming %q", tc.pr.Name, d.Condition, err, tc.want)
		}
	}
}

// check-capacity counts what pods take through claim templates and
// DRA-backed extended resources alike (CA says NotFound for any template).
func TestCheckCapacity(t *testing.T) {
	for _, tc := range []struct {
		name, tmpl string
		count      int
		noRetry    bool
		wantType   string
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"claim templates fit", "claims", 8, false, prv1.Provisioned, metav1.ConditionTrue, ReasonCapacityIsFound},
		{"extended resources fit", "extended", 8, false, prv1.Provisioned, metav1.ConditionTrue, ReasonCapacityIsFound},
		{"one GPU too many", "claims", 9, false, prv1.Provisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound},
		{"one GPU too many, noRetry", "extended", 9, true, prv1.Failed, metav1.ConditionTrue, ReasonCapacityIsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planner, snap := cluster(t, 2, 8, 10) // 16 GPUs, 8 free
			pr := request("cc", CheckCapacity, tc.tmpl, tc.count)
			if tc.noRetry {
				pr.Spec.Parameters = map[string]prv1.Parameter{NoRetryParameter: "true"}
			}
			before := len(snap.AllResourceClaims())
			d, err := (&Decider{Planner: planner, Templates: templates(extendedTemplate(), claimTemplate())}).Decide(context.Background(), pr)
			if err != nil {
				t.Fatal(err)
			}
			if d.Condition.Type != tc.wantType || d.Condition.Status != tc.wantStatus || d.Condition.Reason != tc.wantReason {
				t.Fatalf("condition %+v, want %s=%s %s", d.Condition, tc.wantType, tc.wantStatus, tc.wantReason)
			}
			if len(d.ScaleUps) != 0 {
				t.Errorf("check-capacity asked for nodes: %+v", d.ScaleUps)
			}
			// Found capacity stays taken (booked) in the snapshot; capacity
			// not found leaves it as it was.
			after := len(snap.AllResourceClaims())
			if found := tc.wantStatus == metav1.ConditionTrue && tc.wantType == prv1.Provisioned; found != (after == before+tc.count) || !found && after != before {
				t.Errorf("claims %d -> %d for %d pods (found=%v)", before, after, tc.count, found)
			}
		})
	}
}

// A batch: the second request cannot take the room the first was given.
func TestCheckCapacityBatchTakesRoomOnce(t *testing.T) {
	planner, _ := cluster(t, 2, 8, 10)
	e := &Decider{Planner: planner, Templates: templates(extendedTemplate())}
	first, err := e.Decide(context.Background(), request("first", CheckCapacity, "extended", 6))
	if err != nil || !first.Provisioned() {
		t.Fatalf("first: %+v %v", first.Condition, err)
	}
	second, err := e.Decide(context.Background(), request("second", CheckCapacity, "extended", 6))
	if err != nil || second.Condition.Reason != ReasonCapacityIsNotFound {
		t.Fatalf("second: %+v %v, want CapacityIsNotFound (2 GPUs left)", second.Condition, err)
	}
}

// The atomic class: 16 one-GPU pods on 8-GPU nodes are 2 new nodes in one
// step, less what existing nodes take; one node over max is none.
func TestAtomic(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		nodes, used, maxSize int
		tmpl                 string
		count                int
		wantReason           string
		wantNodes            int
		wantText             string
	}{
		{"empty group", 0, 0, 4, "extended", 16, ReasonCapacityIsProvisioned, 2, "16 pods on new nodes (gpu +2)"},
		{"claims too", 0, 0, 4, "claims", 16, ReasonCapacityIsProvisioned, 2, ""},
		{"existing room first", 1, 4, 4, "extended", 16, ReasonCapacityIsProvisioned, 2, "12 pods on new nodes (gpu +2), 4 on existing nodes"},
		{"fits existing", 2, 0, 4, "extended", 16, ReasonCapacityIsFound, 0, ""},
		{"one node over max", 0, 0, 4, "extended", 40, ReasonCapacityIsNotFound, 0, "all 40 pods need 5 new nodes; max size 4 leaves room for 4"},
		{"one node over max, noRetry: failed", 0, 0, 4, "extended", 40, ReasonCapacityIsNotFound, 0, "(noRetry): no scale-up for the 40 pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planner, _ := cluster(t, tc.nodes, tc.used, tc.maxSize)
			pr := request("atomic", BestEffortAtomic, tc.tmpl, tc.count)
			if strings.Contains(tc.name, "noRetry") {
				pr.Spec.Parameters = map[string]prv1.Parameter{NoRetryParameter: "true"}
			}
			d, err := (&Decider{Planner: planner, Templates: templates(extendedTemplate(), claimTemplate())}).Decide(context.Background(), pr)
			if err != nil {
				t.Fatal(err)
			}
			nodes := 0
			for _, su := range d.ScaleUps {
				nodes += su.NewNodes
			}
			wantType := prv1.Provisioned
			if strings.Contains(tc.name, "noRetry") {
				wantType = prv1.Failed
			}
			if d.Condition.Type != wantType || d.Condition.Reason != tc.wantReason || nodes != tc.wantNodes || !strings.Contains(d.Condition.Message, tc.wantText) {
				t.Fatalf("decision %+v, %d new nodes; want %s, %d nodes, message with %q", d.Condition, nodes, tc.wantReason, tc.wantNodes, tc.wantText)
			}
		})
	}
}

// A partly consumed request books only what is not consumed yet: the
// capacity is never counted twice.
func TestBookPartlyConsumed(t *testing.T) {
	planner, snap := cluster(t, 2, 0, 10) // 16 free GPUs
	pr := request("booked", CheckCapacity, "extended", 12)
	var consumers []*v1.Pod
	for i := 0; i < 5; i++ { // five of its real pods run already
		pod := extendedTemplate().Template.Spec
		real := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("real-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("real-%d", i)),
			Annotations: map[string]string{ConsumeAnnotation: "booked"}}, Spec: *pod.DeepCopy()}
		if _, _, ferr := planner.Engine.PlaceOnAnyNode(real, snap.NodeNames()); ferr != nil {
			t.Fatal(ferr)
		}
		consumers = append(consumers, real)
	}
	e := &Decider{Planner: planner, Templates: templates(extendedTemplate())}
	got := e.Book(context.Background(), []*prv1.ProvisioningRequest{pr}, map[string][]*v1.Pod{"default/booked": consumers})
	if len(got) != 1 || got[0].Err != nil || got[0].Booked != 7 || got[0].Unplaced != 0 || got[0].Consumed != 5 {
		t.Fatalf("booking %+v, want 7 booked (12 less 5 consumed)", got)
	}
	// 16 GPUs: 5 real, 7 booked, 4 left for anything else.
	next, err := e.Decide(context.Background(), request("next", CheckCapacity, "extended", 5))
	if err != nil || next.Condition.Reason != ReasonCapacityIsNotFound {
		t.Fatalf("a request for 5 after the booking: %+v %v, want CapacityIsNotFound", next.Condition, err)
	}
	fits, err := e.Decide(context.Background(), request("fits", CheckCapacity, "extended", 4))
	if err != nil || !fits.Provisioned() {
		t.Fatalf("a request for 4 after the booking: %+v %v, want CapacityIsFound", fits.Condition, err)
	}
}

func TestServes(t *testing.T) {
	withInstance := func(pr *prv1.ProvisioningRequest, name string) *prv1.ProvisioningRequest {
		pr.Spec.Parameters = map[string]prv1.Parameter{ProcessorInstanceParameter: prv1.Parameter(name)}
		return pr
	}
	for _, tc := range []struct {
		instance string
		pr       *prv1.ProvisioningRequest
		want     bool
	}{
		{"", request("a", CheckCapacity), true},
		{"", request("a", BestEffortAtomic), true},
		{"", request("a", "queued-provisioning.gke.io"), false},
		{"", withInstance(request("a", CheckCapacity), "other"), false},
		{"mine", withInstance(request("a", CheckCapacity), "mine"), true},
		{"mine", request("a", CheckCapacity), false},
		{"mine", request("a", BestEffortAtomic), false},
		{"mine", request("a", "mine"+CheckCapacity), true},
	} {
		if got := (Serving{ProcessorInstance: tc.instance}).Serves(tc.pr); got != tc.want {
			t.Errorf("instance %q, class %q, params %v: serves %v, want %v", tc.instance, tc.pr.Spec.ProvisioningClassName, tc.pr.Spec.Parameters, got, tc.want)
		}
	}
}

func TestLifecycle(t *testing.T) {
	now := fx.Epoch.Add(8 * 24 * time.Hour)
	provisioned := func(at time.Time) *prv1.ProvisioningRequest {
		pr := request("p", CheckCapacity, "extended", 4)
		Set(pr, Condition{Type: prv1.Provisioned, Status: metav1.ConditionTrue, Reason: ReasonCapacityIsFound}, at)
		return pr
	}
	for _, tc := range []struct {
		name     string
		pr       *prv1.ProvisioningRequest
		consumed int
		want     string
		deleted  bool
	}{
		{"booked", provisioned(now.Add(-time.Minute)), 0, "", false},
		{"partly consumed", provisioned(now.Add(-time.Minute)), 3, "", false},
		{"all consumed", provisioned(now.Add(-time.Minute)), 4, ReasonCapacityBookingConsumed, false},
		{"booking over", provisioned(now.Add(-11 * time.Minute)), 0, ReasonCapacityReservationTimeExpired, false},
		{"never provisioned in 7 days", request("old", CheckCapacity, "extended", 1), 0, ReasonExpired, false},
		{"provisioned 8 days ago", provisioned(now.Add(-8 * 24 * time.Hour)), 0, ReasonCapacityReservationTimeExpired, true},
	} {
		c := Lifecycle(tc.pr, tc.consumed, now)
		got := ""
		if c != nil {
			got = c.Reason
		}
		if got != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, c, tc.want)
		}
		if ShouldDelete(tc.pr, now) != tc.deleted {
			t.Errorf("%s: delete %v, want %v", tc.name, !tc.deleted, tc.deleted)
		}
	}
}
