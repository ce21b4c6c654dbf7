package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/test/chart"
)

// provReqEnv is an env whose autoscaler serves ProvisioningRequests: CA's
// CRD from the chart, and the chart's grants for them.
type provReqEnv struct {
	*env
	pr prclient.Interface
}

func newProvReqEnv(t *testing.T, name string, timeout time.Duration) *provReqEnv {
	t.Helper()
	e := newEnvWithin(t, name, timeout)
	if err := cp.InstallCRDFiles(e.ctx, filepath.Join(root, "charts/draxr/crds/autoscaling.x-k8s.io_provisioningrequests.yaml")); err != nil {
		t.Fatal(err)
	}
	c, err := prclient.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	e.grantProvisioningRequests()
	e.deleteOnCleanup(prv1.SchemeGroupVersion.WithResource("provisioningrequests"))
	return &provReqEnv{env: e, pr: c}
}

// grantProvisioningRequests gives the autoscaler's ServiceAccount the
// rules the chart renders for --enable-provisioning-requests (and only
// those beyond the plain manifests' RBAC).
func (e *env) grantProvisioningRequests() {
	e.t.Helper()
	e.grantBatch("enable-provisioning-requests", 3)
}

// grantBatch gives the autoscaler's ServiceAccount the chart's rules on
// autoscaling.x-k8s.io and PodTemplates for the flag (want of them).
func (e *env) grantBatch(flag string, want int) {
	e.t.Helper()
	if err := chart.GrantBatch(e.ctx, cp.Client, root, flag, "draxr-autoscaler-batch-"+e.name, want); err != nil {
		e.t.Fatal(err)
	}
}

// podTemplate creates a PodTemplate whose pods ask for count of the env's
// DRA-backed extended resource, or (claimTemplate) one device through a
// ResourceClaimTemplate of that name.
func (e *provReqEnv) podTemplate(name string, count int64, claimTemplate string) {
	e.t.Helper()
	pod := fx.Pod("x", 100, fx.GPUs(e.resource, count))
	if claimTemplate != "" {
		pod = fx.WithTemplateClaim(fx.Pod("x", 100, nil), "gpu", claimTemplate)
	}
	pod.Spec.NodeSelector = map[string]string{"e2e-test": e.name}
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	pt := &v1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Template: v1.PodTemplateSpec{Spec: pod.Spec}}
	if _, err := cp.Client.CoreV1().PodTemplates(e.ns).Create(e.ctx, pt, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *provReqEnv) request(name, class, template string, count int32) {
	e.t.Helper()
	pr := &prv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: prv1.ProvisioningRequestSpec{ProvisioningClassName: class,
			PodSets: []prv1.PodSet{{PodTemplateRef: prv1.Reference{Name: template}, Count: count}}}}
	if _, err := e.pr.AutoscalingV1().ProvisioningRequests(e.ns).Create(e.ctx, pr, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitCondition waits until the request's condition typ has status and
// reason, and returns it.
func (e *provReqEnv) waitCondition(name, typ string, status metav1.ConditionStatus, reason string, d time.Duration) metav1.Condition {
	e.t.Helper()
	var got metav1.Condition
	e.eventually(d, fmt.Sprintf("%s: %s=%s %s", name, typ, status, reason), func() error {
		pr, err := e.pr.AutoscalingV1().ProvisioningRequests(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(pr.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("conditions %+v", pr.Status.Conditions)
		}
		got = *c
		return nil
	})
	return got
}

// consumers creates n pods from the template that consume the request.
func (e *provReqEnv) consumers(request, template string, n int) {
	e.t.Helper()
	pt, err := cp.Client.CoreV1().PodTemplates(e.ns).Get(e.ctx, template, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", request, i), Namespace: e.ns,
			Annotations: map[string]string{provreq.ConsumeAnnotation: request, provreq.ClassAnnotation: provreq.BestEffortAtomic}},
			Spec: *pt.Template.Spec.DeepCopy()}
		if _, err := cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// Both classes live, exact with DRA devices: an atomic request gets its
// nodes in one scale-up; its capacity stays booked while it is partly
// consumed, so a check-capacity request with claim templates finds none
// until the booking ends, then finds it (CA: never, for templates); a
// request one node over the group's max gets nothing, and says why.
func TestProvisioningRequestsLive(t *testing.T) {
	e := newProvReqEnv(t, "provreq", 5*time.Minute)
	class := e.class("provreq-gpu", e.driver, e.resource)
	tmpl := fx.ClaimTemplate("one-gpu", class.Name, 1)
	tmpl.Namespace = e.ns
	if _, err := cp.Client.ResourceV1().ResourceClaimTemplates(e.ns).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.podTemplate("extended", 1, "")
	e.podTemplate("claims", 1, "one-gpu")
	e.autoscaler(e.nodeGroups(groupSpec{name: "provreq-gpu", min: 0, max: 4, draDevices: 8}),
		"--enable-provisioning-requests", "--provisioning-request-initial-backoff-time=2s", "--provisioning-request-max-backoff-time=4s")

	// 16 one-GPU pods on 8-GPU nodes: 2 nodes, asked for at once.
	e.request("train", provreq.BestEffortAtomic, "extended", 16)
	c := e.waitCondition("train", prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, time.Minute)
	if !strings.Contains(c.Message, "provreq-gpu +2") {
		t.Errorf("Provisioned message %q, want provreq-gpu +2", c.Message)
	}
	e.eventually(time.Minute, "2 nodes", func() error {
		if n := len(e.groupNodes("provreq-gpu")); n != 2 {
			return fmt.Errorf("%d nodes", n)
		}
		return nil
	})
	// Events are written in the background: wait for the one.
	e.eventually(time.Minute, "one TriggeredScaleUp event on the request naming provreq-gpu 0->2", func() error {
		ups, err := cp.Client.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "reason=TriggeredScaleUp,involvedObject.name=train"})
		if err != nil || len(ups.Items) != 1 || !strings.Contains(ups.Items[0].Message, "provreq-gpu 0->2") {
			return fmt.Errorf("%d events (%v)", len(ups.Items), err)
		}
		return nil
	})

	// Half of it runs; the other half stays booked.
	e.consumers("train", "extended", 8)
	e.waitPodsBound(8, time.Minute)
	e.request("check", provreq.CheckCapacity, "claims", 8)
	c = e.waitCondition("check", prv1.Provisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, time.Minute)
	if !strings.Contains(c.Message, "8 of 8 pods do not fit the existing nodes") {
		t.Errorf("CapacityIsNotFound message %q", c.Message)
	}
	// draxr simulate on the live cluster says what the loop set.
	groups := e.nodeGroups(groupSpec{name: "provreq-gpu", min: 0, max: 4, draDevices: 8})
	code, out, errOut := runDraxr(t, filepath.Join(bins, "draxr"), "simulate", "--kubeconfig", cp.AdminKubeconfig,
		"--node-group-config", groups, "-n", e.ns, "-o", "json")
	if code != 0 {
		t.Fatalf("draxr simulate --kubeconfig: exit %d: %s", code, errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, r := range plan.ProvisioningRequests {
		if r.Namespace == e.ns {
			seen[r.Name] = fmt.Sprintf("%s=%s %s", r.Condition.Type, r.Condition.Status, r.Condition.Reason)
		}
	}
	if seen["train"] != "Provisioned=True CapacityIsProvisioned" || seen["check"] != "Provisioned=False CapacityIsNotFound" {
		t.Errorf("draxr simulate --kubeconfig reports %v, want train provisioned and check not found, as the loop set", seen)
	}

	// The booking ends with its request: the claim-template pods fit.
	if err := e.pr.AutoscalingV1().ProvisioningRequests(e.ns).Delete(e.ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCondition("check", prv1.Provisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, time.Minute)

	// 40 more GPUs would need 5 nodes; the group has room for 2.
	e.request("too-big", provreq.BestEffortAtomic, "extended", 40)
	c = e.waitCondition("too-big", prv1.Provisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, time.Minute)
	for _, want := range []string{"node group provreq-gpu", "all 40 pods need 5 new nodes", "max size 4 leaves room for 2"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("too-big's message %q lacks %q", c.Message, want)
		}
	}
	e.consistently(5*time.Second, "no node for too-big", func() error {
		if n := len(e.groupNodes("provreq-gpu")); n != 2 {
			return fmt.Errorf("%d nodes, want still 2", n)
		}
		return nil
	})
}
