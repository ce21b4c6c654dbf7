package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/expander"
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
	code, out, errOut := draxr(t, "simulate", "-f", path, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}

	objs, err := input.LoadPaths([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	src, err := clusterapi.DumpSource(objs)
	if err != nil {
		t.Fatal(err)
	}
	var kube []runtime.Object
	for _, n := range objs.Nodes {
		kube = append(kube, n)
	}
	for _, s := range objs.ResourceSlices {
		kube = append(kube, s)
	}
	for _, c := range objs.DeviceClasses {
		kube = append(kube, c)
	}
	for _, p := range objs.PendingPods {
		kube = append(kube, p)
	}
	client := fake.NewClientset(kube...)
	provider, err := clusterapi.New(clusterapi.Options{Dynamic: src.Dynamic, Kube: client, Mapper: src.Mapper,
		TemplateCacheExpiry: clusterapi.DefaultTemplateCacheExpiry})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	listers := clusterstate.NewListers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	exp, err := expander.New("least-waste", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := core.New(core.Config{Client: client, Listers: listers, Provider: provider, Expander: exp, DryRun: true,
		Recorder: record.NewFakeRecorder(1000), StatusNamespace: "kube-system", StatusName: core.DryRunStatusConfigMapName})
	res, err := a.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}

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
