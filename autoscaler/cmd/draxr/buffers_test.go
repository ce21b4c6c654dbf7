package main

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/autoscaler/buffers"
	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/cloudprovider/local"
	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/view"
)

// buffersDump: the group gpu of 8-GPU nodes and its node gpu-0 (8 free
// GPUs), three pending one-GPU pods, a buffer of 16 GPUs and one naming a
// missing PodTemplate.
func buffersDump() string {
	var b strings.Builder
	b.WriteString(strings.SplitN(localDump(0), "\n---\napiVersion: v1\nkind: Pod\n", 2)[0])
	b.WriteString(`
---
apiVersion: v1
kind: PodTemplate
metadata: {name: serve, namespace: ml}
template:
  spec:
    containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: warm, namespace: ml, uid: warm-uid}
spec:
  podTemplateRef: {name: serve}
  limits: {example.com/gpu: "16"}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: typo, namespace: ml}
spec:
  podTemplateRef: {name: srve}
  replicas: 2
`)
	for i := range 3 {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: pod-%d, namespace: ml}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
`, i)
	}
	return b.String()
}

// draxr simulate shows a buffer's room as draxr-autoscaler keeps it: real
// pods first, the buffer's pods on what is left and on new nodes, which
// the loop asks for too; a bad buffer says which field.
func TestSimulateBuffersAreTheLoops(t *testing.T) {
	path := writeFile(t, "dump.yaml", buffersDump())
	plan := simulatePlan(t, "-f", path)
	byName := map[string]cb.Report{}
	for _, r := range plan.CapacityBuffers {
		byName[r.Name] = r
	}
	warm, typo := byName["warm"], byName["typo"]
	if warm.Replicas != 16 || warm.KeptOnExistingNodes != 5 || warm.OnNewNodes["gpu"] != 11 || warm.NoRoom != 0 ||
		warm.Condition.Reason != cb.ReasonFakePodsInjected {
		t.Errorf("warm: %+v; want 16 replicas, 5 on gpu-0 (after the 3 pods), 11 on new nodes", warm)
	}
	if typo.Condition.Type != cb.ReadyForProvisioning || typo.Condition.Status != "False" ||
		!strings.Contains(typo.Condition.Message, "CapacityBuffer ml/typo: spec.podTemplateRef.name: PodTemplate ml/srve not found") {
		t.Errorf("typo: %+v", typo)
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 2 || len(plan.ExistingNodes) != 3 {
		t.Fatalf("plan %+v, existing %+v; want gpu +2 and the 3 pods on gpu-0", plan.ScaleUps, plan.ExistingNodes)
	}
	for _, p := range plan.ExistingNodes {
		if strings.HasPrefix(p.Pod.Name, "capacity-buffer-") {
			t.Errorf("buffer pod %s listed among the plan's pods", p.Pod.Name)
		}
	}

	objs, err := input.LoadPaths([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(apiObjects(objs)...)
	provider, err := local.New(local.Options{Client: client, Groups: objs.NodeGroups, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	bufferIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, b := range objs.CapacityBuffers {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := bufferIdx.Add(&unstructured.Unstructured{Object: u}); err != nil {
			t.Fatal(err)
		}
	}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pt := range objs.PodTemplates {
		if err := templates.Add(pt); err != nil {
			t.Fatal(err)
		}
	}
	ctx, a := dryRunAutoscaler(t, client, provider, nil, func(c *core.Config) {
		c.Buffers = &buffers.Config{Cluster: view.View{CapacityBuffers: cache.NewGenericLister(bufferIdx, cb.GroupVersionResource().GroupResource()),
			PodTemplates: corelisters.NewPodTemplateLister(templates)}, Client: buffers.DryRunWriter(), Controller: true, Injection: true}
	})
	res, err := a.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ScaleUp == nil || res.ScaleUp.NodeGroup != "gpu" || res.ScaleUp.NewNodes != plan.ScaleUps[0].NewNodes {
		t.Errorf("the loop scales up %+v; simulate %+v", res.ScaleUp, plan.ScaleUps)
	}
}
