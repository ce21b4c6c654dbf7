package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaleup"
)

// The plan `draxr simulate -f` makes of a Cluster API dump is the one a
// draxr-autoscaler loop acts on over the same objects: one RunOnce in dry
// run, with the clusterapi provider reading the dump, asks for the same
// group, the same number of nodes, for the same pods.
func TestDumpPlanIsTheAutoscalersPlan(t *testing.T) {
	path := writeFile(t, "dump.yaml", capiDump(30, ""))
	plan := simulatePlan(t, "-f", path)

	objs, err := input.LoadPaths([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	src, err := clusterapi.DumpSource(objs)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(apiObjects(objs)...)
	provider, err := clusterapi.New(clusterapi.Options{Dump: src.Dump, TemplateCacheExpiry: clusterapi.DefaultTemplateCacheExpiry})
	if err != nil {
		t.Fatal(err)
	}
	res := runOnceDryRun(t, client, provider)
	ctx := context.Background()

	if len(plan.ScaleUps) != 1 || res.ScaleUp == nil {
		t.Fatalf("simulate: %v; autoscaler: %v; want one scale-up each", plan.ScaleUps, res.ScaleUp)
	}
	cli, loop := plan.ScaleUps[0], *res.ScaleUp
	if cli.NodeGroup != loop.NodeGroup || cli.NewNodes != loop.NewNodes || !slices.Equal(podNames(cli.Pods), podNames(loop.Pods)) {
		t.Errorf("simulate plans %s +%d for %v\nthe autoscaler %s +%d for %v", cli.NodeGroup, cli.NewNodes, podNames(cli.Pods),
			loop.NodeGroup, loop.NewNodes, podNames(loop.Pods))
	}
	if want := "IncreaseSize " + cli.NodeGroup + " +1"; len(res.WouldCall) != 1 || res.WouldCall[0] != want {
		t.Errorf("dry run would call %v, want [%s]", res.WouldCall, want)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, core.DryRunStatusConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("dry-run status: %v", err)
	}
	if d := cm.Data["draxr"]; !strings.Contains(d, `"dryRun": true`) && !strings.Contains(d, "dryRun: true") {
		t.Errorf("dry-run status not marked dry run:\n%s", d)
	}
}

func podNames(refs []scaleup.PodRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	slices.Sort(out)
	return out
}

// The same for draxr's NodeGroups and the local provider.
func TestDumpPlanIsTheAutoscalersPlanLocal(t *testing.T) {
	// 8 of 30 pods on gpu-0: +3.
	checkLocalDumpPlan(t, localDump(0), 3)
}

// A dump taken while the scheduler binds pods to gpu-0: they hold half
// its GPUs (their extended-resource claims are allocated there), so both
// plan 4 of the 30 pods on gpu-0 and +4 nodes for the rest, and neither
// plans the pods being bound again.
func TestDumpPlanWithPodsBeingBound(t *testing.T) {
	checkLocalDumpPlan(t, localDump(4), 4)
}

// localDump: a NodeGroup gpu of 8-GPU nodes, its node gpu-0, 30 pending
// one-GPU pods and binding pods the scheduler is binding to gpu-0.
func localDump(binding int) string {
	var b strings.Builder
	b.WriteString(fixtures.GPUGroupDump(5))
	for i := range 30 {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: train-%02d, namespace: ml}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
`, i)
	}
	for i := range binding {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: bound-%[1]d, namespace: ml, uid: uid-bound-%[1]d}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: bound-%[1]d-extended-resources-x
  namespace: ml
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: bound-%[1]d, uid: uid-bound-%[1]d, controller: true}]
spec: {devices: {requests: [{name: container-0-request-0, exactly: {deviceClassName: gpu.example.com}}]}}
status:
  allocation:
    devices: {results: [{request: container-0-request-0, driver: gpu.example.com, pool: gpu-0, device: g%[1]d}]}
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [gpu-0]}]}]
`, i)
	}
	return b.String()
}

func checkLocalDumpPlan(t *testing.T, dump string, wantNodes int) {
	t.Helper()
	path := writeFile(t, "dump.yaml", dump)
	plan := simulatePlan(t, "-f", path)
	objs, err := input.LoadPaths([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(apiObjects(objs)...)
	provider, err := local.New(local.Options{Client: client, Groups: objs.NodeGroups, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	res := runOnceDryRun(t, client, provider)
	if len(plan.ScaleUps) != 1 || res.ScaleUp == nil {
		t.Fatalf("simulate: %v; autoscaler: %v; want one scale-up each", plan.ScaleUps, res.ScaleUp)
	}
	cli, loop := plan.ScaleUps[0], *res.ScaleUp
	if cli.NodeGroup != "gpu" || cli.NewNodes != wantNodes || cli.NodeGroup != loop.NodeGroup || cli.NewNodes != loop.NewNodes ||
		!slices.Equal(podNames(cli.Pods), podNames(loop.Pods)) {
		t.Errorf("simulate plans %s +%d for %d pods, the autoscaler %s +%d for %d; want gpu +%d from both",
			cli.NodeGroup, cli.NewNodes, len(cli.Pods), loop.NodeGroup, loop.NewNodes, len(loop.Pods), wantNodes)
	}
	for _, p := range plan.NoScaleUp {
		if strings.HasPrefix(p.Pod.Name, "bound-") {
			t.Errorf("simulate plans pod %s, which the scheduler is binding: %s", p.Pod.Name, p.Reason)
		}
	}
	for _, p := range plan.ExistingNodes {
		if strings.HasPrefix(p.Pod.Name, "bound-") {
			t.Errorf("simulate places pod %s on %s, which the scheduler is binding", p.Pod.Name, p.Node)
		}
	}
}

func runOnceDryRun(t *testing.T, client *fake.Clientset, provider cloudprovider.Provider) *core.LoopResult {
	t.Helper()
	ctx, a := dryRunAutoscaler(t, client, provider, nil)
	res, err := a.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// dryRunAutoscaler is draxr-autoscaler in dry run over client's objects
// (its informers synced), serving requests when given.
func dryRunAutoscaler(t *testing.T, client *fake.Clientset, provider cloudprovider.Provider, requests *provisioning.Processor,
	more ...func(*core.Config)) (context.Context, *core.Autoscaler) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := liveview.FromInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	exp, err := expander.New("least-waste", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := core.Config{Client: client, View: listers, Provider: provider, Expander: exp, DryRun: true,
		Recorder: record.NewFakeRecorder(1000), StatusNamespace: "kube-system", StatusName: core.DryRunStatusConfigMapName,
		ProvisioningRequests: requests}
	for _, f := range more {
		f(&cfg)
	}
	return ctx, core.New(cfg)
}

// simulatePlan runs draxr simulate -o json with args and decodes its plan.
func simulatePlan(t *testing.T, args ...string) report.SimulateOutput {
	t.Helper()
	code, out, errOut := draxr(t, append([]string{"simulate", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("draxr simulate %v: exit %d, stderr: %s", args, code, errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// apiObjects are the objects read that an API server would hold, for the
// tests' in-memory one.
func apiObjects(objs *input.Objects) []runtime.Object {
	out := appendAll(nil, objs.Nodes)
	out = appendAll(out, objs.RunningPods)
	out = appendAll(out, objs.PendingPods)
	out = appendAll(out, objs.ResourceSlices)
	out = appendAll(out, objs.DeviceClasses)
	out = appendAll(out, objs.ResourceClaims)
	out = appendAll(out, objs.ResourceClaimTemplates)
	out = appendAll(out, objs.DeviceTaintRules)
	out = appendAll(out, objs.DaemonSets)
	return appendAll(out, objs.ConfigMaps)
}
