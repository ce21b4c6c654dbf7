package clusterstate

import (
	"context"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/cloudprovider"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/view"
)

// fakeGroup is a node group with a fixed target size.
type fakeGroup struct {
	g      *nodegroup.NodeGroup
	target int
}

func (f fakeGroup) Id() string                                    { return f.g.Name }
func (f fakeGroup) MinSize() int                                  { return f.g.Spec.MinSize }
func (f fakeGroup) MaxSize() int                                  { return f.g.Spec.MaxSize }
func (f fakeGroup) TargetSize() (int, error)                      { return f.target, nil }
func (f fakeGroup) IncreaseSize(context.Context, int) error       { return nil }
func (f fakeGroup) AtomicIncreaseSize(context.Context, int) error { return nil }
func (f fakeGroup) DecreaseTargetSize(context.Context, int) error { return nil }
func (f fakeGroup) DeleteNodes(context.Context, []*v1.Node) error { return nil }
func (f fakeGroup) Nodes() ([]cloudprovider.Instance, error)      { return nil, nil }
func (f fakeGroup) GetOptions(d cloudprovider.NodeGroupOptions) (*cloudprovider.NodeGroupOptions, error) {
	return &d, nil
}
func (f fakeGroup) TemplateNodeInfo() (*v1.Node, []*resourceapi.ResourceSlice, error) {
	n, s := f.g.NewNode("template-" + f.g.Name)
	return n, s, nil
}

type fakeProvider struct{ groups []cloudprovider.NodeGroup }

func (p fakeProvider) NodeGroups() []cloudprovider.NodeGroup { return p.groups }
func (p fakeProvider) Refresh(context.Context) error         { return nil }
func (p fakeProvider) NodeGroupForNode(n *v1.Node) (cloudprovider.NodeGroup, error) {
	for _, g := range p.groups {
		if g.Id() == nodegroup.Group(n) {
			return g, nil
		}
	}
	return nil, nil
}

func groupNode(name string, ready bool) *v1.Node {
	n := fx.Node(name, 64, 256, nil)
	n.Labels[nodegroup.GroupLabel] = "gpu"
	if !ready {
		n.Status.Conditions[0].Status = v1.ConditionFalse
	}
	return n
}

func pending(name string, unschedulable, gated bool) *v1.Pod {
	p := fx.Pod(name, 100, fx.GPUs(fx.GPUResource, 1))
	if unschedulable {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
	}
	if gated {
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "hold"}}
	}
	return p
}

// Nodes that cannot take pods yet stand in the snapshot as their
// template, devices included, and count as upcoming; so do nodes asked
// for that have not registered.
func TestBuildCountsUpcomingNodes(t *testing.T) {
	g := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: nodegroup.Spec{MaxSize: 10,
		Template: *fx.Node("t", 64, 256, nil), ResourceSlices: []resourceapi.ResourceSliceSpec{fx.GPUSlice("x", 8).Spec}}}
	objs := []runtime.Object{
		groupNode("gpu-0", true), fx.GPUSlice("gpu-0", 8), // ready, devices published
		groupNode("gpu-1", true),  // ready, devices not yet published
		groupNode("gpu-2", false), // not Ready
		fx.Node("other", 8, 32, nil),
		pending("waiting", true, false), pending("fresh", false, false), pending("gated", true, true),
	}
	l := syncedListers(t, objs...)

	st, err := build(l, fakeProvider{groups: []cloudprovider.NodeGroup{fakeGroup{g: g, target: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Upcoming["gpu"] != 4 {
		t.Errorf("upcoming = %d, want 4 (gpu-1 without devices, gpu-2 not Ready, 2 not registered)", st.Upcoming["gpu"])
	}
	var ready []string
	for n := range st.Ready {
		ready = append(ready, n)
	}
	sort.Strings(ready)
	if len(ready) != 2 || ready[0] != "gpu-0" || ready[1] != "other" {
		t.Errorf("ready nodes = %v, want gpu-0 and other", ready)
	}
	var nodes []string
	for _, n := range st.Objects.Nodes {
		nodes = append(nodes, n.Name)
	}
	sort.Strings(nodes)
	want := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-upcoming-3", "gpu-upcoming-4", "other"}
	if len(nodes) != len(want) {
		t.Fatalf("snapshot nodes = %v, want %v", nodes, want)
	}
	for i := range want {
		if nodes[i] != want[i] {
			t.Fatalf("snapshot nodes = %v, want %v", nodes, want)
		}
	}
	slicesOf := map[string]int{}
	for _, s := range st.Objects.ResourceSlices {
		slicesOf[*s.Spec.NodeName]++
	}
	for _, n := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-upcoming-3", "gpu-upcoming-4"} {
		if slicesOf[n] != 1 {
			t.Errorf("node %s has %d slices in the snapshot, want 1 (published or from the template)", n, slicesOf[n])
		}
	}
	if len(st.Unschedulable) != 1 || st.Unschedulable[0].Name != "waiting" {
		t.Errorf("unschedulable = %v, want only the pod the scheduler gave up on (not gated, not untried)", st.Unschedulable)
	}
}

// Pods the scheduler has placed but not yet bound (their devices are
// allocated and reserved for them) keep a stale Unschedulable condition;
// they must not be planned again, or their devices count twice.
func TestPodsBeingBoundAreNotUnschedulable(t *testing.T) {
	withXRClaim := pending("binding-xr", true, false)
	withXRClaim.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "binding-xr-extended-resources-abcde"}
	withClaim := fx.WithClaim(pending("binding-claim", true, false), "gpu", "reserved")
	withClaim.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("reserved")}}
	reserved := fx.Claim("reserved", "gpu.example.com", 1)
	reserved.Status.Allocation = &resourceapi.AllocationResult{}
	reserved.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: withClaim.Name, UID: withClaim.UID}}
	// The scheduler allocated the extended-resource claim and reserved it
	// for the pod; the pod's status does not name it yet.
	lagging := pending("binding-xr-lagging", true, false)
	lagging.UID = "uid-binding-xr-lagging"
	xrClaim := fx.Claim("binding-xr-lagging-extended-resources-xyz", "gpu.example.com", 1)
	xrClaim.Status.Allocation = &resourceapi.AllocationResult{}
	xrClaim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: lagging.Name, UID: lagging.UID}}
	notYours := fx.WithClaim(pending("waiting-claim", true, false), "gpu", "unreserved")
	notYours.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("unreserved")}}
	unreserved := fx.Claim("unreserved", "gpu.example.com", 1)

	l := syncedListers(t, withXRClaim, withClaim, reserved, lagging, xrClaim, notYours, unreserved, pending("waiting", true, false))
	st, err := build(l, fakeProvider{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range st.Unschedulable {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if len(names) != 2 || names[0] != "waiting" || names[1] != "waiting-claim" {
		t.Errorf("unschedulable = %v, want [waiting waiting-claim]: the three pods being bound are not", names)
	}
}

// onNode is an allocation of devices local to node, as the allocator
// writes it.
func onNode(node string) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}}}
}

// A pod being bound is on its node, as the scheduler assumes it: where
// its claim's devices are allocated, or else its nominatedNodeName. A
// node that only receives pods is not empty.
func TestPodsBeingBoundAreOnTheirNode(t *testing.T) {
	allocated := pending("allocated", true, false)
	allocated.UID = "uid-allocated"
	claim := fx.Claim("allocated-extended-resources-abc", "gpu.example.com", 1)
	claim.Status.Allocation = onNode("gpu-1")
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: allocated.Name, UID: allocated.UID}}
	// Created, not allocated yet: the scheduler nominated the node first.
	nominated := pending("nominated", true, false)
	nominated.UID = "uid-nominated"
	nominated.Status.NominatedNodeName = "gpu-0"
	created := fx.Claim("nominated-extended-resources-def", "gpu.example.com", 1)
	created.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	created.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: nominated.Name, UID: nominated.UID, Controller: ptr.To(true)}}
	// Nominated by a preemption, not being bound: stays pending.
	preempting := pending("preempting", true, false)
	preempting.Status.NominatedNodeName = "gpu-0"
	// Bound to a node the snapshot does not hold: nowhere.
	elsewhere := pending("elsewhere", true, false)
	elsewhere.UID = "uid-elsewhere"
	gone := fx.Claim("elsewhere-claim", "gpu.example.com", 1)
	gone.Status.Allocation = onNode("deleted-node")
	gone.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: elsewhere.Name, UID: elsewhere.UID}}

	l := syncedListers(t, groupNode("gpu-0", true), groupNode("gpu-1", true), allocated, claim, nominated, created, preempting, elsewhere, gone)
	st, err := build(l, fakeProvider{})
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]string{}
	for _, p := range st.Objects.RunningPods {
		on[p.Name] = p.Spec.NodeName
	}
	want := map[string]string{"allocated": "gpu-1", "nominated": "gpu-0"}
	if len(on) != len(want) || on["allocated"] != "gpu-1" || on["nominated"] != "gpu-0" {
		t.Errorf("pods on nodes = %v, want %v", on, want)
	}
	if got := st.Binding; len(got) != 2 || len(got["gpu-1"]) != 1 || got["gpu-1"][0] != "default/allocated" || len(got["gpu-0"]) != 1 || got["gpu-0"][0] != "default/nominated" {
		t.Errorf("binding = %v, want gpu-0: [default/nominated], gpu-1: [default/allocated]", got)
	}
	if cached, err := l.Pods.Pods("default").Get("allocated"); err != nil || cached.Spec.NodeName != "" {
		t.Errorf("the informer's pod was changed: nodeName %q (%v)", cached.Spec.NodeName, err)
	}
	var names []string
	for _, p := range st.Unschedulable {
		names = append(names, p.Name)
	}
	if len(names) != 1 || names[0] != "preempting" {
		t.Errorf("unschedulable = %v, want [preempting]", names)
	}
}

// With --bypassed-scheduler-names, a pending pod of a bypassed scheduler
// counts before any scheduler marked it unschedulable; other schedulers'
// untried pods do not.
func TestBypassedSchedulersPodsCountUntried(t *testing.T) {
	untried := func(name, scheduler string) *v1.Pod {
		p := pending(name, false, false)
		p.Spec.SchedulerName = scheduler
		return p
	}
	tried := untried("volcano-tried", "volcano")
	tried.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulerError"}}
	l := syncedListers(t, untried("volcano-new", "volcano"), untried("default-new", v1.DefaultSchedulerName),
		untried("other-new", "yunikorn"), tried, pending("marked", true, false))
	for _, tc := range []struct {
		bypassed []string
		want     string
	}{
		{nil, "marked"},
		{[]string{"volcano"}, "marked volcano-new"},
		{[]string{"volcano", v1.DefaultSchedulerName}, "default-new marked volcano-new"},
	} {
		st, err := readState(NewRegistry(RegistryConfig{BypassedSchedulerNames: tc.bypassed}), l, fakeProvider{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range st.Unschedulable {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("bypassed %v: unschedulable = %q, want %q", tc.bypassed, got, tc.want)
		}
	}
}

// A burst: the scheduler gave up on one pod of a Job and has not reached
// the others yet. They are planned with it (one scale-up for the burst);
// untried pods of another controller, of the same controller under
// another scheduler, or of no controller still wait for the scheduler.
func TestUntriedSiblingsOfGivenUpPodsArePlanned(t *testing.T) {
	owned := func(p *v1.Pod, uid string) *v1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job-" + uid,
			UID: types.UID(uid), Controller: ptr.To(true)}}
		return p
	}
	other := owned(pending("train-other-scheduler", false, false), "train")
	other.Spec.SchedulerName = "volcano"
	tried := owned(pending("train-tried", false, false), "train")
	tried.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulerError"}}
	notController := owned(pending("serve-not-controller", false, false), "train")
	notController.OwnerReferences[0].Controller = nil
	l := syncedListers(t, owned(pending("train-0", true, false), "train"), owned(pending("train-1", false, false), "train"),
		owned(pending("train-2", false, false), "train"), owned(pending("serve-0", false, false), "serve"),
		pending("bare", false, false), other, tried, notController)
	st, err := readState(NewRegistry(RegistryConfig{}), l, fakeProvider{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range st.Unschedulable {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names, " "), "train-0 train-1 train-2"; got != want {
		t.Errorf("planned %q, want %q", got, want)
	}
	// CA's scheduler_unprocessed: the scheduler has still not tried them.
	if st.SchedulerUnprocessed != 6 {
		t.Errorf("%d pods not tried yet, want 6", st.SchedulerUnprocessed)
	}
}

// growingClaims is a claim lister whose cache receives a claim between two
// reads, as an informer does while the scheduler binds.
type growingClaims struct {
	resourcelisters.ResourceClaimLister
	later *resourceapi.ResourceClaim
	reads int
}

func (g *growingClaims) List(labels.Selector) ([]*resourceapi.ResourceClaim, error) {
	g.reads++
	if g.reads == 1 {
		return nil, nil
	}
	return []*resourceapi.ResourceClaim{g.later}, nil
}

// One read of the claims decides both which pods are being bound and what
// the snapshot holds: a claim the scheduler created for a pod is never in
// the snapshot while that pod is still planned as pending (it would fit
// nowhere and send its siblings to new nodes).
func TestClaimsReadOnceForBindingAndSnapshot(t *testing.T) {
	p := pending("racing", true, false)
	p.UID = "uid-racing"
	claim := fx.Claim("racing-extended-resources-abc", "gpu.example.com", 1)
	claim.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}

	l := syncedListers(t, p)
	claims := &growingClaims{later: claim}
	l.Claims = claims
	st, err := build(l, fakeProvider{})
	if err != nil {
		t.Fatal(err)
	}
	pendingPod := len(st.Objects.PendingPods) == 1
	claimIn := len(st.Objects.ResourceClaims) == 1
	if pendingPod && claimIn {
		t.Errorf("pod %s planned as pending while its claim %s is in the snapshot (claims read %d times)", p.Name, claim.Name, claims.reads)
	}
	if claims.reads != 1 {
		t.Errorf("claims read %d times per loop, want once", claims.reads)
	}
}

// syncedListers are the autoscaler's listers over a fake client holding
// objs, their caches synced; the informers stop with the test.
func syncedListers(t *testing.T, objs ...runtime.Object) view.View {
	t.Helper()
	f := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	l := liveview.FromInformers(f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return l
}

// build reads the listers and the provider with no readiness limits and
// no backoff, as one loop would with nothing to give up on.
func build(l view.View, provider cloudprovider.Provider) (*State, error) {
	return readState(NewRegistry(RegistryConfig{}), l, provider)
}

// readState is one loop's state with the registry's actions not applied:
// these tests plant nothing that needs one.
func readState(r *Registry, l view.View, provider cloudprovider.Provider) (*State, error) {
	as, err := r.Assess(l, provider, time.Now())
	if err != nil {
		return nil, err
	}
	return r.State(as)
}

// A group whose template ResourceSlices consume counters their pool does
// not declare is left out of scale-up with what to fix, and said once in
// a Warning event; the other groups are planned.
func TestBrokenTemplateSlicesLeaveTheGroupOut(t *testing.T) {
	good := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "good"}, Spec: nodegroup.Spec{MaxSize: 3, Template: *fx.Node("t", 8, 32, nil)}}
	bad := &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: nodegroup.Spec{MaxSize: 3, Template: *fx.Node("t", 8, 32, nil)}}
	for _, s := range fx.NVIDIADynamicMIG("t", 1) {
		bad.Spec.ResourceSlices = append(bad.Spec.ResourceSlices, s.Spec)
	}
	misspelt := false
	for i := range bad.Spec.ResourceSlices {
		for j := range bad.Spec.ResourceSlices[i].Devices {
			for k := range bad.Spec.ResourceSlices[i].Devices[j].ConsumesCounters {
				bad.Spec.ResourceSlices[i].Devices[j].ConsumesCounters[k].CounterSet = "gpu-0-counter-sett"
				misspelt = true
			}
		}
	}
	if !misspelt {
		t.Fatal("the DynamicMIG fixture has no counter consumption to misspell")
	}
	l := syncedListers(t)
	r := NewRegistry(RegistryConfig{})
	provider := fakeProvider{groups: []cloudprovider.NodeGroup{fakeGroup{g: good}, fakeGroup{g: bad}}}
	for loop := 0; loop < 2; loop++ {
		as, err := r.Assess(l, provider, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var events []Action
		for _, a := range as.Actions {
			if a.Kind == Emit && a.Event.Reason == EventInvalidTemplate {
				events = append(events, a)
			}
		}
		st, err := r.State(as)
		if err != nil {
			t.Fatal(err)
		}
		why := st.NotForScaleUp["bad"]
		if !strings.Contains(why, `consumes counter set "gpu-0-counter-sett"`) || !strings.Contains(why, "fix:") {
			t.Errorf("loop %d: bad group not for scale-up because %q, want the misspelt counter set and a fix", loop, why)
		}
		if eligible := st.ScaleUpEligible(); len(eligible) != 1 || eligible[0].Name != "good" {
			t.Errorf("loop %d: eligible groups %v, want only good", loop, eligible)
		}
		if want := 1 - loop; len(events) != want {
			t.Errorf("loop %d: %d InvalidNodeGroupTemplate events, want %d (once per problem)", loop, len(events), want)
		}
	}
}

// Every reader classifies pods with input.ClassifyPod and files them by
// one policy: the loop by LoopFiling, draxr simulate over a live cluster
// and over a dump by SimulateFiling. One pod of each class goes through
// all three, and each lands where the policy says.
func TestPodClassesLoopAndCLI(t *testing.T) {
	node := fx.Node("n", 64, 256, nil)
	gone := metav1.NewTime(time.Now())
	deleting := func(p *v1.Pod) *v1.Pod {
		p.DeletionTimestamp, p.Finalizers = &gone, []string{"example.com/hold"}
		return p
	}
	bound := func(p *v1.Pod) *v1.Pod {
		p.Spec.NodeName = "n"
		p.Status.Phase = v1.PodRunning
		return p
	}
	finished := bound(fx.Pod("finished", 100, nil))
	finished.Status.Phase = v1.PodSucceeded
	binding := fx.WithClaim(fx.Pod("binding", 100, nil), "gpu", "binding-gpu")
	claim := fx.Claim("binding-gpu", "gpu.example.com", 1)
	claim.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n"}}}}}}}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: binding.Name, UID: binding.UID}}
	cases := []struct {
		pod        *v1.Pod
		class      input.PodClass
		loop, dump input.Filing
	}{
		{finished, input.PodFinished, input.Dropped, input.Dropped},
		{bound(fx.Pod("running", 100, nil)), input.PodRunning, input.OnItsNode, input.OnItsNode},
		{deleting(bound(fx.Pod("terminating-bound", 100, nil))), input.PodTerminatingBound, input.Dropped, input.OnItsNode},
		{deleting(pending("terminating-pending", true, false)), input.PodTerminatingPending, input.Dropped, input.ToPlan},
		{binding, input.PodBeingBound, input.OnAssumedNode, input.OnAssumedNode},
		{pending("gated", false, true), input.PodGated, input.Dropped, input.ToPlan},
		{pending("unschedulable", true, false), input.PodUnschedulable, input.ToPlan, input.ToPlan},
		{pending("unprocessed", false, false), input.PodUnprocessed, input.NotTriedYet, input.ToPlan},
	}
	objs := []runtime.Object{node, claim, fx.Class("gpu.example.com", fx.Driver, "", fx.Epoch)}
	inBinding := input.PodsInBinding([]*resourceapi.ResourceClaim{claim})
	for _, tc := range cases {
		if got := input.ClassifyPod(tc.pod, inBinding); got != tc.class {
			t.Errorf("pod %s: class %s, want %s", tc.pod.Name, got, tc.class)
		}
		if got := input.LoopFiling(tc.class); got != tc.loop {
			t.Errorf("class %s: the loop files it %d, want %d", tc.class, got, tc.loop)
		}
		if got := input.SimulateFiling(tc.class); got != tc.dump {
			t.Errorf("class %s: draxr simulate files it %d, want %d", tc.class, got, tc.dump)
		}
		objs = append(objs, tc.pod)
	}
	filed := func(running, pending []*v1.Pod) map[string]input.Filing {
		out := map[string]input.Filing{}
		for _, p := range running {
			out[p.Name] = input.OnItsNode
		}
		for _, p := range pending {
			out[p.Name] = input.ToPlan
		}
		return out
	}
	want := func(of func(c input.PodClass) input.Filing, notTried input.Filing) map[string]input.Filing {
		out := map[string]input.Filing{}
		for _, tc := range cases {
			switch f := of(tc.class); f {
			case input.Dropped:
			case input.OnAssumedNode: // on the node the scheduler is binding it to
				out[tc.pod.Name] = input.OnItsNode
			case input.NotTriedYet:
				if notTried != input.Dropped {
					out[tc.pod.Name] = notTried
				}
			default:
				out[tc.pod.Name] = f
			}
		}
		return out
	}

	l := syncedListers(t, objs...)
	st, err := readState(NewRegistry(RegistryConfig{}), l, fakeProvider{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filed(st.Objects.RunningPods, st.Unschedulable), want(input.LoopFiling, input.Dropped); !maps.Equal(got, want) {
		t.Errorf("loop: filed %v, want %v", got, want)
	}
	if st.SchedulerUnprocessed != 1 {
		t.Errorf("loop: %d pods not tried yet, want 1 (unprocessed)", st.SchedulerUnprocessed)
	}
	if got := st.Binding["n"]; len(got) != 1 || got[0] != "default/binding" {
		t.Errorf("loop: binding on n %v, want default/binding", got)
	}

	live, err := l.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filed(live.RunningPods, live.PendingPods), want(input.SimulateFiling, input.ToPlan); !maps.Equal(got, want) {
		t.Errorf("draxr simulate --kubeconfig: filed %v, want %v", got, want)
	}

	var dump []byte
	for _, o := range objs {
		o = o.DeepCopyObject()
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		if err != nil {
			t.Fatal(err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		dump = append(append(dump, "---\n"...), data...)
	}
	read, err := input.Parse(dump, "dump.yaml")
	if err != nil {
		t.Fatal(err)
	}
	read.PlaceBindingPods()
	if got, want := filed(read.RunningPods, read.PendingPods), want(input.SimulateFiling, input.ToPlan); !maps.Equal(got, want) {
		t.Errorf("draxr simulate -f: filed %v, want %v", got, want)
	}
}
