package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/provreq"
)

// requestsDump: the NodeGroup gpu of 8-GPU nodes with its node gpu-0 (8
// free GPUs), PodTemplates asking one GPU by extended resource or by
// claim template, requests of both classes (one no autoscaler of draxr's
// serves, one naming a missing template), a pending pod that consumes the
// atomic request and three that do not.
func requestsDump() string {
	var b strings.Builder
	b.WriteString(strings.SplitN(localDump(0), "\n---\napiVersion: v1\nkind: Pod\n", 2)[0])
	b.WriteString(`
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: extended, namespace: ml}
template:
  spec:
    containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
---
apiVersion: v1
kind: PodTemplate
metadata: {name: claims, namespace: ml}
template:
  spec:
    resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
    containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
`)
	for _, r := range []struct {
		name, class, template string
		count                 int
	}{
		{"a-fits", provreq.CheckCapacity, "extended", 6},
		{"b-no-room", provreq.CheckCapacity, "claims", 4},
		{"c-atomic", provreq.BestEffortAtomic, "extended", 16},
		{"d-gke", "queued-provisioning.gke.io", "extended", 1},
		{"e-no-template", provreq.BestEffortAtomic, "missing", 1},
	} {
		fmt.Fprintf(&b, `---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: %s, namespace: ml}
spec:
  provisioningClassName: %s
  podSets: [{podTemplateRef: {name: %s}, count: %d}]
`, r.name, r.class, r.template, r.count)
	}
	for i, consume := range []string{"c-atomic", "", "", ""} {
		annotations := "{}"
		if consume != "" {
			annotations = "{autoscaling.x-k8s.io/consume-provisioning-request: " + consume + "}"
		}
		b.WriteString(fixtures.PendingGPUPodDoc(fmt.Sprintf("pod-%d", i), annotations))
	}
	return b.String()
}

// What draxr simulate says of each ProvisioningRequest is what
// draxr-autoscaler's loops set on the same objects: the same condition,
// reason and message, the same atomic scale-up.
func TestSimulateRequestsAreTheLoops(t *testing.T) {
	path := writeFile(t, "dump.yaml", requestsDump())
	plan := simulatePlan(t, "-f", path)
	cli := map[string]provreq.Report{}
	for _, r := range plan.ProvisioningRequests {
		cli[r.Name] = r
	}
	want := map[string]string{
		"a-fits":        "Provisioned=True CapacityIsFound",
		"b-no-room":     "Provisioned=False CapacityIsNotFound",
		"c-atomic":      "Provisioned=True CapacityIsProvisioned",
		"e-no-template": "Failed=True FailedToCreatePods",
	}
	if len(cli) != len(want) {
		t.Fatalf("simulate reports %d requests, want %d (d-gke is not draxr's): %+v", len(cli), len(want), plan.ProvisioningRequests)
	}
	for name, w := range want {
		c := cli[name].Condition
		if got := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason); got != w {
			t.Errorf("simulate: %s: %s (%s), want %s", name, got, c.Message, w)
		}
	}
	if su := cli["c-atomic"].ScaleUp; len(su) != 1 || su[0].NodeGroup != "gpu" || su[0].NewNodes != 2 {
		t.Errorf("simulate: c-atomic scales up %+v, want gpu +2 (2 of 16 on gpu-0's free GPUs)", su)
	}
	// The regular pods are planned after the requests: gpu-0 is full, the
	// atomic request's two nodes have 2 GPUs to spare, so of the three
	// pods that consume nothing two go there and one gets a node; the
	// consumer gets none.
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 1 || len(plan.ScaleUps[0].Pods) != 1 || len(plan.ExistingNodes) != 2 {
		t.Errorf("regular scale-up %+v, on existing nodes %+v; want gpu +1 for one pod, two on the atomic request's nodes", plan.ScaleUps, plan.ExistingNodes)
	}
	for _, p := range append(plan.ExistingNodes, plan.ScaleUps[0].Placements...) {
		if p.Pod.Name == "pod-0" {
			t.Errorf("the consumer pod-0 is planned (%s): it waits for its request", p.Node)
		}
	}

	loop := loopRequests(t, path)
	for name := range want {
		l, c := loop[name], cli[name]
		if l.Condition != c.Condition || fmt.Sprint(stripAtomic(l.ScaleUp)) != fmt.Sprint(c.ScaleUp) {
			t.Errorf("%s:\nsimulate  %+v %+v\nthe loop  %+v %+v", name, c.Condition, c.ScaleUp, l.Condition, l.ScaleUp)
		}
	}
}

func stripAtomic(sus []provreq.ReportScaleUp) []provreq.ReportScaleUp {
	out := make([]provreq.ReportScaleUp, len(sus))
	for i, su := range sus {
		out[i] = provreq.ReportScaleUp{NodeGroup: su.NodeGroup, NewNodes: su.NewNodes}
	}
	return out
}

// loopRequests runs draxr-autoscaler's loop in dry run over the dump
// (check-capacity in batches) until it decides nothing more, and returns
// the last report of each request.
func loopRequests(t *testing.T, path string) map[string]provreq.Report {
	t.Helper()
	objs, err := input.LoadPaths([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(apiObjects(objs)...)
	provider, err := local.New(local.Options{Client: client, Groups: objs.NodeGroups, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	requests := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pr := range objs.ProvisioningRequests {
		if err := requests.Add(pr); err != nil {
			t.Fatal(err)
		}
	}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pt := range objs.PodTemplates {
		if err := templates.Add(pt); err != nil {
			t.Fatal(err)
		}
	}
	proc := provisioning.New(provisioning.Config{Requests: prlisters.NewProvisioningRequestLister(requests),
		Templates: corelisters.NewPodTemplateLister(templates), Client: provisioning.DryRunClient(indexerReader{requests}),
		BatchProcessing: true, MaxBatchSize: 100})
	ctx, a := dryRunAutoscaler(t, client, provider, proc)
	out := map[string]provreq.Report{}
	for range 5 {
		res, err := a.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.ProvisioningRequests) == 0 {
			return out
		}
		for _, r := range res.ProvisioningRequests {
			out[r.Name] = r
		}
	}
	t.Fatal("the loop still decides requests after 5 loops")
	return nil
}

// indexerReader reads requests from the loop's cache (a dump's API
// server); its writes are a dry run's.
type indexerReader struct{ cache.Indexer }

func (r indexerReader) Get(_ context.Context, ns, name string) (*prv1.ProvisioningRequest, error) {
	obj, ok, err := r.GetByKey(ns + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(prv1.Resource("provisioningrequests"), name)
	}
	return obj.(*prv1.ProvisioningRequest).DeepCopy(), nil
}

func (indexerReader) UpdateStatus(context.Context, *prv1.ProvisioningRequest) (*prv1.ProvisioningRequest, error) {
	panic("a dry run writes nothing")
}

func (indexerReader) Delete(context.Context, string, string) error {
	panic("a dry run deletes nothing")
}

// Pods that consume a ProvisioningRequest wait for its capacity whether
// or not the dump holds the request, as the loop (and CA's filter) drops
// them: no placement, no scale-up, a reason each in NO SCALE-UP, by
// either annotation.
func TestSimulateConsumersWithoutTheirRequestDriveNoScaleUp(t *testing.T) {
	var b strings.Builder
	b.WriteString(strings.SplitN(localDump(0), "\n---\napiVersion: v1\nkind: Pod\n", 2)[0])
	for i := range 9 {
		annotation := provreq.ConsumeAnnotation
		if i == 8 {
			annotation = provreq.DeprecatedConsumeAnnotation
		}
		b.WriteString("\n" + fixtures.PendingGPUPodDoc(fmt.Sprintf("pod-%d", i), "{"+annotation+": train}"))
	}
	plan := simulatePlan(t, "-f", writeFile(t, "dump.yaml", b.String()))
	if len(plan.ScaleUps) != 0 || len(plan.ExistingNodes) != 0 {
		t.Errorf("scale-ups %+v, on existing nodes %+v; want none: every pod waits for ProvisioningRequest ml/train", plan.ScaleUps, plan.ExistingNodes)
	}
	if len(plan.NoScaleUp) != 9 {
		t.Fatalf("NO SCALE-UP %+v, want the 9 consumers", plan.NoScaleUp)
	}
	for _, n := range plan.NoScaleUp {
		if n.Code != "ConsumesProvisioningRequest" || !strings.Contains(n.Reason, "consuming ProvisioningRequest ml/train") {
			t.Errorf("%s: %s %q, want ConsumesProvisioningRequest naming ml/train", n.Pod, n.Code, n.Reason)
		}
	}
}
