package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/test/kueue"
)

// kueueObjects are the cluster's queues for the test: per class a
// ProvisioningRequestConfig, an AdmissionCheck, a ClusterQueue and a
// LocalQueue in the env's namespace, named <prefix>-<queue>.
func kueueObjects(e *env, prefix string) []*unstructured.Unstructured {
	docs := []string{fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %s-flavor}`, prefix)}
	for _, q := range []struct{ name, class, params string }{
		// The atomic queue fails a request no group can take at once
		// (noRetry), so Kueue retries it and then rejects the workload.
		{"atomic", provreq.BestEffortAtomic, `parameters: {noRetry: "true"}`},
		{"check", provreq.CheckCapacity, ""},
	} {
		docs = append(docs, queueDocs(e, prefix, q.name, prefix+"-flavor", q.class, q.params)...)
	}
	return unstructuredDocs(e, docs)
}

// queueDocs are one Kueue queue asking draxr through ProvisioningRequests:
// a ProvisioningRequestConfig of class (spec lines extra added, Kueue
// retrying once after 1 s), its AdmissionCheck, a ClusterQueue of flavor
// with room for the env's resource, and a LocalQueue in the env's
// namespace, named <prefix>-<queue> (the LocalQueue <queue>).
func queueDocs(e *env, prefix, queue, flavor, class, extra string) []string {
	return []string{fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: %[1]s-%[2]s}
spec:
  provisioningClassName: %[3]s
  retryStrategy: {backoffLimitCount: 1, backoffBaseSeconds: 1, backoffMaxSeconds: 2}
  %[4]s`, prefix, queue, class, extra),
		fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: %[1]s-%[2]s}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: %[1]s-%[2]s}`, prefix, queue),
		fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s-%[2]s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, %[3]q]
    flavors:
    - name: %[4]s
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 1000Gi}
      - {name: %[3]q, nominalQuota: "1000"}
  admissionChecksStrategy:
    admissionChecks: [{name: %[1]s-%[2]s}]`, prefix, queue, e.resource, flavor),
		fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[2]s, namespace: %[3]s}
spec: {clusterQueue: %[1]s-%[2]s}`, prefix, queue, e.ns)}
}

// unstructuredDocs decodes YAML documents.
func unstructuredDocs(e *env, docs []string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			e.t.Fatalf("%v\n%s", err, d)
		}
		out = append(out, u)
	}
	return out
}

// kueueJob creates a suspended Job of n pods in Kueue's queue; each pod
// asks one DRA-backed extended resource, or one device through the claim
// template.
func (e *provReqEnv) kueueJob(name, queue string, n int32, claimTemplate string) {
	e.t.Helper()
	pod := fx.Pod("x", 100, fx.GPUs(e.resource, 1))
	if claimTemplate != "" {
		pod = fx.WithTemplateClaim(fx.Pod("x", 100, nil), "gpu", claimTemplate)
	}
	spec := pod.Spec
	spec.NodeSelector = map[string]string{"e2e-test": e.name}
	spec.RestartPolicy = v1.RestartPolicyNever
	spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": queue}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(n), Completions: ptr.To(n), Suspend: ptr.To(true),
			Template: v1.PodTemplateSpec{Spec: spec}}}
	if _, err := cp.Client.BatchV1().Jobs(e.ns).Create(e.ctx, job, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// requestOf waits for the ProvisioningRequest Kueue made for the job's
// workload (attempt n) and returns its name.
func (e *provReqEnv) requestOf(job string, attempt int) string {
	e.t.Helper()
	var name string
	e.eventually(time.Minute, fmt.Sprintf("Kueue's ProvisioningRequest for job %s, attempt %d", job, attempt), func() error {
		list, err := e.pr.AutoscalingV1().ProvisioningRequests(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, pr := range list.Items {
			seen = append(seen, pr.Name)
			if strings.Contains(pr.Name, "job-"+job+"-") && strings.HasSuffix(pr.Name, fmt.Sprintf("-%d", attempt)) {
				name = pr.Name
				return nil
			}
		}
		return fmt.Errorf("requests %v", seen)
	})
	return name
}

func (e *provReqEnv) jobSuspended(name string) (bool, error) {
	j, err := cp.Client.BatchV1().Jobs(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return ptr.Deref(j.Spec.Suspend, false), nil
}

// The real Kueue asks draxr through ProvisioningRequests: a 16-pod Job of
// one-GPU pods (DRA-backed extended resource) gets exactly 2 new 8-GPU
// nodes in one scale-up and is admitted, and its pods bind there; a Job
// whose pods take GPUs through claim templates is found room on those
// nodes by check-capacity (CA answers CapacityIsNotFound for any
// template); a Job no group can take gets no node, and Kueue retries it
// and then rejects the workload.
func TestKueueProvisioningRequests(t *testing.T) {
	e := newProvReqEnv(t, "kueue", 6*time.Minute)
	p, err := kueue.Start(e.ctx, cp, root)
	if errors.Is(err, kueue.ErrNotRoot) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kueue log:\n%s", p.LogTail(6000))
		}
		p.Stop(10 * time.Second)
	})
	class := e.class("kueue-gpu", e.driver, e.resource)
	tmpl := fx.ClaimTemplate("one-gpu", class.Name, 1)
	tmpl.Namespace = e.ns
	if _, err := cp.Client.ResourceV1().ResourceClaimTemplates(e.ns).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.ApplyObjects(e.ctx, kueueObjects(e.env, "e2e")); err != nil {
		t.Fatal(err)
	}
	e.autoscaler(e.nodeGroups(groupSpec{name: "kueue-gpu", min: 0, max: 4, draDevices: 8}),
		"--enable-provisioning-requests", "--scale-down-enabled=false",
		"--provisioning-request-initial-backoff-time=1s", "--provisioning-request-max-backoff-time=2s")

	// 16 pods, all or nothing: 2 nodes, one scale-up, then admission.
	e.kueueJob("train", "atomic", 16, "")
	pr := e.requestOf("train", 1)
	e.waitCondition(pr, prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, time.Minute)
	e.eventually(time.Minute, "Kueue admits the job", func() error {
		if s, err := e.jobSuspended("train"); err != nil || s {
			return fmt.Errorf("suspended %v (%v)", s, err)
		}
		return nil
	})
	perNode := e.waitPodsBound(16, 2*time.Minute)
	if len(perNode) != 2 || len(e.groupNodes("kueue-gpu")) != 2 {
		t.Fatalf("16 pods on %v, group has %d nodes; want 8 on each of 2", perNode, len(e.groupNodes("kueue-gpu")))
	}
	// Events are written in the background: wait for the one.
	e.eventually(time.Minute, "one TriggeredScaleUp event on the request, kueue-gpu 0->2", func() error {
		ups, err := cp.Client.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "reason=TriggeredScaleUp,involvedObject.name=" + pr})
		if err != nil || len(ups.Items) != 1 || !strings.Contains(ups.Items[0].Message, "kueue-gpu 0->2") {
			return fmt.Errorf("%d events (%v)", len(ups.Items), err)
		}
		return nil
	})
	pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if provreq.ConsumedRequest(&pod) != pr || pod.Status.ExtendedResourceClaimStatus == nil {
			t.Fatalf("pod %s: consumes %q, extended-resource claim %+v; want %s and its device", pod.Name, provreq.ConsumedRequest(&pod), pod.Status.ExtendedResourceClaimStatus, pr)
		}
	}
	e.waitCondition(pr, prv1.BookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, time.Minute)

	// The job goes; its nodes stay (scale-down is off). Claim-template
	// pods: check-capacity finds room on them.
	if err := cp.Client.BatchV1().Jobs(e.ns).Delete(e.ctx, "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	e.waitPodsBound(0, time.Minute)
	e.kueueJob("infer", "check", 8, "one-gpu")
	pr = e.requestOf("infer", 1)
	e.waitCondition(pr, prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, time.Minute)
	e.waitPodsBound(8, 2*time.Minute)
	if n := len(e.groupNodes("kueue-gpu")); n != 2 {
		t.Errorf("check-capacity changed the group to %d nodes", n)
	}

	// 40 more: 8 fit the free devices, 32 need 4 nodes, the group has room
	// for 2. No node; the request fails (noRetry), Kueue tries once more,
	// then deactivates the workload.
	// (Kueue deletes a failed attempt's request when it makes the next.)
	e.kueueJob("huge", "atomic", 40, "")
	e.requestOf("huge", 1)
	pr = e.requestOf("huge", 2)
	c := e.waitCondition(pr, prv1.Failed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound, time.Minute)
	for _, want := range []string{"node group kueue-gpu", "all 32 pods need 4 new nodes", "max size 4 leaves room for 2"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the second attempt's message %q lacks %q", c.Message, want)
		}
	}
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	workloads := dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}).Namespace(e.ns)
	e.eventually(time.Minute, "Kueue deactivates the huge job's workload", func() error {
		list, err := workloads.List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, w := range list.Items {
			if !strings.Contains(w.GetName(), "job-huge-") {
				continue
			}
			if active, found, _ := unstructured.NestedBool(w.Object, "spec", "active"); found && !active {
				return nil
			}
			conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
			return fmt.Errorf("workload %s active, conditions %v", w.GetName(), conds)
		}
		return errors.New("no workload for job huge")
	})
	if n := len(e.groupNodes("kueue-gpu")); n != 2 {
		t.Errorf("the group has %d nodes after the huge job, want still 2", n)
	}
}
