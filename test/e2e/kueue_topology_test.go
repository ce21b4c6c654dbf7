package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/test/kueue"
)

// rackKey is the topology level of the rack tests: a node label whose
// value is the node's rack.
const rackKey = "example.com/rack"

// kueueTopologyObjects are the queues of Kueue's Topology-Aware
// Scheduling over the env's nodes: a Topology of racks (then hosts, so
// Kueue assigns pods per node), a ResourceFlavor with that topology whose
// nodeLabels select the env's nodes, and per queue a best-effort-atomic
// ProvisioningRequestConfig, its AdmissionCheck, a ClusterQueue and a
// LocalQueue. Queue "rack" maps the rack draxr chose
// (provisioningClassDetails[example.com/rack]) into the pods' node
// selector; queue "unmapped" does not.
func kueueTopologyObjects(e *env, prefix string) []*unstructured.Unstructured {
	docs := []string{
		fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: %[1]s-racks}
spec:
  levels:
  - nodeLabel: %[2]s
  - nodeLabel: kubernetes.io/hostname`, prefix, rackKey),
		fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[1]s-racks}
spec:
  nodeLabels: {e2e-test: %[2]s}
  topologyName: %[1]s-racks`, prefix, e.name),
	}
	for _, q := range []struct{ name, updates string }{
		{"rack", fmt.Sprintf(`podSetUpdates:
    nodeSelector:
    - {key: %[1]s, valueFromProvisioningClassDetail: %[1]s}`, rackKey)},
		{"unmapped", ""},
	} {
		// noRetry: a request no rack can take fails at once, and Kueue
		// retries it (one more attempt) instead of draxr waiting.
		docs = append(docs, queueDocs(e, prefix, q.name, prefix+"-racks", provreq.BestEffortAtomic,
			"parameters: {noRetry: \"true\"}\n  "+q.updates)...)
	}
	return unstructuredDocs(e, docs)
}

// rackJob creates a suspended Job of n pods in Kueue's queue, each asking
// one GPU of allocatable (Kueue's TAS counts node allocatable, not DRA
// devices), all required in one rack.
func (e *provReqEnv) rackJob(name, queue string, n int32) {
	e.t.Helper()
	spec := fx.Pod("x", 100, fx.GPUs(e.resource, 1)).Spec
	spec.NodeSelector = map[string]string{"e2e-test": e.name}
	spec.RestartPolicy = v1.RestartPolicyNever
	spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": queue}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(n), Completions: ptr.To(n), Suspend: ptr.To(true),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{provreq.RequiredTopologyAnnotation: rackKey}},
				Spec:       spec}}}
	if _, err := cp.Client.BatchV1().Jobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// racks counts the env's nodes per rack label value.
func (e *env) racks() map[string]int {
	e.t.Helper()
	nodes, err := cp.Client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{LabelSelector: "e2e-test=" + e.name})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range nodes.Items {
		out[n.Labels[rackKey]]++
	}
	return out
}

// jobPodsPerRack counts the job's bound pods per rack of their node, and
// its pods not bound.
func (e *env) jobPodsPerRack(job string) (perRack map[string]int, unbound int) {
	e.t.Helper()
	pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		e.t.Fatal(err)
	}
	perRack = map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			unbound++
			continue
		}
		n, err := cp.Client.CoreV1().Nodes().Get(e.ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		perRack[n.Labels[rackKey]]++
	}
	return perRack, unbound
}

// workloadOf returns the Kueue Workload of a job.
func (e *env) workloadOf(job string) (*unstructured.Unstructured, error) {
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		return nil, err
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}).
		Namespace(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].GetName(), "job-"+job+"-") {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no workload for job %s", job)
}

// The real Kueue's Topology-Aware Scheduling with draxr: rack a has an
// empty 8-GPU node and cannot grow, rack b can grow. A 16-GPU Job
// required in one rack gets its 2 new nodes in rack b (not 1 in a and 1
// in b, as a topology-blind autoscaler does; draxr simulate plans the
// same), the request names rack b in provisioningClassDetails, Kueue's
// second pass places the workload there and all 16 pods bind on rack b. Then a 16-GPU Job that fits the racks
// together but no rack alone gets no node, its request fails
// (CapacityIsNotFound naming each rack) and Kueue retries it. Last, what
// goes wrong without the podSetUpdates mapping.
func TestKueueTopology(t *testing.T) {
	e := newProvReqEnv(t, "kueuetas", 4*time.Minute)
	p, err := kueue.Start(e.ctx, cp, root)
	if errors.Is(err, kueue.ErrNotRoot) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kueue log:\n%s", p.LogTail(8000))
		}
		p.Stop(10 * time.Second)
	})
	if err := cp.ApplyObjects(e.ctx, kueueTopologyObjects(e.env, "tas")); err != nil {
		t.Fatal(err)
	}
	rackA := groupSpec{name: "kueuetas-a", min: 0, max: 1, pluginDevices: 8, labels: map[string]string{rackKey: "a"}}
	e.existingGroupNode(rackA)
	groups := e.nodeGroups(rackA,
		groupSpec{name: "kueuetas-b", min: 0, max: 3, pluginDevices: 8, labels: map[string]string{rackKey: "b"}})
	args := []string{"--enable-provisioning-requests", "--scale-down-enabled=false",
		"--provisioning-request-initial-backoff-time=1s", "--provisioning-request-max-backoff-time=2s"}
	first := e.autoscaler(groups, args...)
	// Rack a's node is Ready (Kueue counts only Ready nodes) before the job.
	e.eventually(time.Minute, "rack a's node Ready", func() error { return e.nodesReady(false, "kueuetas-a-0") })

	// Offline is live: with the loop stopped, draxr simulate decides the
	// job's request as the loop then does.
	first.Stop(10 * time.Second)
	e.rackJob("train", "rack", 16)
	pr := e.requestOf("train", 1)
	code, out, errOut := runDraxr(t, filepath.Join(bins, "draxr"), "simulate", "--kubeconfig", cp.AdminKubeconfig,
		"--node-group-config", groups, "-n", e.ns, "-o", "json")
	if code != 0 {
		t.Fatalf("draxr simulate --kubeconfig: exit %d: %s", code, errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, r := range plan.ProvisioningRequests {
		if r.Name == pr {
			planned = append(planned, fmt.Sprintf("%s=%s %s %v %v", r.Condition.Type, r.Condition.Status, r.Condition.Reason, r.ScaleUp, r.ProvisioningClassDetails))
		}
	}
	if want := fmt.Sprintf("Provisioned=True CapacityIsProvisioned [{kueuetas-b 2 false}] map[%s:b]", rackKey); len(planned) != 1 || planned[0] != want {
		t.Errorf("draxr simulate plans %s as %q, want %q", pr, planned, want)
	}
	second := e.autoscaler(groups, args...)
	c := e.waitCondition(pr, prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, time.Minute)
	got, err := e.pr.AutoscalingV1().ProvisioningRequests(e.ns).Get(e.ctx, pr, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Status.ProvisioningClassDetails; len(d) != 1 || d[rackKey] != "b" {
		t.Errorf("provisioningClassDetails %v, want {%s: b}", d, rackKey)
	}
	if !strings.Contains(c.Message, rackKey+"=b") {
		t.Errorf("Provisioned message %q does not name the rack", c.Message)
	}
	if r := e.racks(); r["a"] != 1 || r["b"] != 2 {
		t.Errorf("nodes per rack %v, want a:1 (untouched) b:2", r)
	}
	e.eventually(time.Minute, "Kueue admits the job after its second pass", func() error {
		if s, err := e.jobSuspended("train"); err != nil || s {
			return fmt.Errorf("suspended %v (%v)", s, err)
		}
		return nil
	})
	e.eventually(time.Minute, "all 16 pods bound on rack b", func() error {
		perRack, unbound := e.jobPodsPerRack("train")
		if perRack["b"] != 16 || unbound != 0 || len(perRack) != 1 {
			return fmt.Errorf("pods per rack %v, %d not bound", perRack, unbound)
		}
		return nil
	})
	// Kueue pinned the pods to rack b (podSetUpdates) and its topology
	// ungater let them go.
	pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeSelector[rackKey] != "b" || len(pod.Spec.SchedulingGates) != 0 || provreq.ConsumedRequest(&pod) != pr {
			t.Fatalf("pod %s: nodeSelector %v, gates %v, consumes %q; want %s=b, none, %s",
				pod.Name, pod.Spec.NodeSelector, pod.Spec.SchedulingGates, provreq.ConsumedRequest(&pod), rackKey, pr)
		}
	}
	wl, err := e.workloadOf("train")
	if err != nil {
		t.Fatal(err)
	}
	psa, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	if len(psa) != 1 {
		t.Fatalf("workload %s: podSetAssignments %v", wl.GetName(), psa)
	}
	if ta, ok, _ := unstructured.NestedMap(psa[0].(map[string]any), "topologyAssignment"); !ok {
		t.Errorf("workload %s was admitted without a topology assignment: %v", wl.GetName(), psa[0])
	} else {
		t.Logf("Kueue's topology assignment: %v", ta)
	}

	// 16 more: rack a has 8 free, rack b room for one more node (8): the
	// racks together hold them, no rack alone does. No node; the request
	// fails naming each rack, and Kueue retries it.
	before := e.racks()
	e.rackJob("wide", "rack", 16)
	// Kueue deletes a failed attempt's request when it makes the next:
	// the second attempt's outcome is the one to read.
	e.requestOf("wide", 1)
	pr = e.requestOf("wide", 2)
	e.eventually(time.Minute, pr+": Failed=True CapacityIsNotFound, no details", func() error {
		got, err := e.pr.AutoscalingV1().ProvisioningRequests(e.ns).Get(e.ctx, pr, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f := meta.FindStatusCondition(got.Status.Conditions, prv1.Failed)
		if f == nil || f.Status != metav1.ConditionTrue || f.Reason != provreq.ReasonCapacityIsNotFound {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, prv1.Provisioned) || len(got.Status.ProvisioningClassDetails) != 0 {
			return fmt.Errorf("failed but provisioned or with details: %+v %v", got.Status.Conditions, got.Status.ProvisioningClassDetails)
		}
		for _, want := range []string{provreq.RequiredTopologyAnnotation, rackKey + "=a: ", rackKey + "=b: "} {
			if !strings.Contains(f.Message, want) {
				t.Errorf("the failure %q lacks %q", f.Message, want)
			}
		}
		t.Logf("%s: %s", pr, f.Message)
		return nil
	})
	e.consistently(5*time.Second, "no node for the wide job, which stays suspended", func() error {
		if r := e.racks(); r["a"] != before["a"] || r["b"] != before["b"] {
			return fmt.Errorf("nodes per rack %v, was %v", r, before)
		}
		if s, err := e.jobSuspended("wide"); err != nil || !s {
			return fmt.Errorf("wide job suspended %v (%v)", s, err)
		}
		return nil
	})
	if err := cp.Client.BatchV1().Jobs(e.ns).Delete(e.ctx, "wide", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}

	// Without the mapping, Kueue's second pass ignores the rack draxr
	// chose. A request made without Kueue books rack a's 8 free GPUs, so
	// draxr provisions an 8-GPU Job of queue "unmapped" in rack b (a new
	// node). Kueue does not know the booking: its second pass runs as
	// soon as the request is Provisioned, while the new node boots (a
	// cloud's node takes minutes; here the local provider waits 45 s),
	// sees 8 free in rack a alone and the pods take the booked room, while
	// rack b's new node stays empty. With a node Ready at once, Kueue would
	// see 8 free in each rack and either could win.
	second.Stop(10 * time.Second)
	e.autoscaler(groups, append(args, "--local-node-ready-delay=45s")...)
	e.podTemplate("held", 1, "")
	e.request("held", provreq.CheckCapacity, "held", 8)
	e.waitCondition("held", prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, time.Minute)
	e.rackJob("solo", "unmapped", 8)
	pr = e.requestOf("solo", 1)
	e.waitCondition(pr, prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, time.Minute)
	got, err = e.pr.AutoscalingV1().ProvisioningRequests(e.ns).Get(e.ctx, pr, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Status.ProvisioningClassDetails; d[rackKey] != "b" {
		t.Errorf("solo's provisioningClassDetails %v, want {%s: b}", d, rackKey)
	}
	e.eventually(time.Minute, "solo's 8 pods bound", func() error {
		if perRack, unbound := e.jobPodsPerRack("solo"); unbound != 0 || perRack["a"]+perRack["b"] != 8 {
			return fmt.Errorf("pods per rack %v, %d not bound", perRack, unbound)
		}
		return nil
	})
	perRack, _ := e.jobPodsPerRack("solo")
	perNode := e.podsPerNode()
	t.Logf("without the mapping: solo's pods per rack %v, pods per node %v, nodes per rack %v", perRack, perNode, e.racks())
	if perRack["a"] != 8 || perNode["kueuetas-b-2"] != 0 || e.racks()["b"] != 3 {
		t.Errorf("without the mapping: solo's pods per rack %v, pods on rack b's new node %d, nodes per rack %v; "+
			"want all 8 in rack a (the booked room) and rack b's third node empty", perRack, perNode["kueuetas-b-2"], e.racks())
	}
}
