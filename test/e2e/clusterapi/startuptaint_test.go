package clusterapi

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/clusterapi/infra"
)

// New machines come up Ready but keep a startup taint for a few seconds,
// as a GPU driver or CNI agent holds a node back while it starts. With
// CA's --startup-taint naming it, such nodes are still coming up, not
// capacity the pods cannot use, and the template copied from them leaves
// the taint out: 12 pods on 8-GPU machines get exactly 2 replicas and no
// pod is told that no group can take it.
func TestStartupTaintHoldsNewNodesBack(t *testing.T) {
	const ns, driver, taint = "capi-startup", "startup.example.com", "example.com/gpu-driver-not-ready"
	const res = v1.ResourceName("example.com/startup-gpu")
	ctx, dyn := begin(t, ns)
	createClass(ctx, t, driver, driver, string(res))
	tmpl, err := infra.Template(ns, "gpu", gpuSlices(driver, 8), "8", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := infra.WithStartupTaint(tmpl, taint, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, tmpl)
	slicesYAML, err := yaml.Marshal(gpuSlices(driver, 8))
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, scalableResource(capi.MachineDeployment, ns, "gpu", map[string]string{
		capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "5",
		capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
		capi.TemplateSlicesAnnotation: string(slicesYAML),
	}))
	startAutoscaler(t, ns, "--startup-taint="+taint)

	createPods(ctx, t, ns, "train", 12, res)
	waitBound(ctx, t, ns, 12)
	// Held-back nodes as capacity would also make their copy, the group's
	// template, tainted: the pods waiting for them would be told no node
	// group can take them.
	evs, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=NotTriggerScaleUp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		t.Errorf("pod %s: NotTriggerScaleUp: %s", ev.InvolvedObject.Name, ev.Message)
	}
	replicasStay(ctx, t, dyn, ns, "gpu", 2, "12 pods, 8 GPUs a machine; the tainted nodes were coming up")
}
