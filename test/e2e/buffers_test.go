package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/report"
)

// A CapacityBuffer of 16 GPUs (limits in the DRA-backed extended resource)
// on an empty group of 8-GPU nodes: 2 nodes, asked for by the buffer's
// pods, and kept (they hold its room), with CA's conditions and events.
func TestCapacityBufferLive(t *testing.T) {
	e := &provReqEnv{env: newEnvWithin(t, "buffer", 4*time.Minute)}
	if err := cp.InstallCRDFiles(e.ctx, filepath.Join(root, "charts/draxr/crds/autoscaling.x-k8s.io_capacitybuffers.yaml")); err != nil {
		t.Fatal(err)
	}
	e.deleteOnCleanup(cb.GroupVersionResource())
	e.grantBatch("capacity-buffer-pod-injection-enabled", 6)
	e.class("buffer-gpu", e.driver, e.resource)
	e.podTemplate("serve", 1, "")
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	buffers := dyn.Resource(cb.GroupVersionResource()).Namespace(e.ns)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cb.Group + "/" + cb.Version, "kind": cb.Kind,
		"metadata": map[string]any{"name": "warm", "namespace": e.ns},
		"spec":     map[string]any{"podTemplateRef": map[string]any{"name": "serve"}, "limits": map[string]any{string(e.resource): "16"}},
	}}
	if _, err := buffers.Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.autoscaler(e.nodeGroups(groupSpec{name: "buffer-gpu", min: 0, max: 4, draDevices: 8}),
		"--capacity-buffer-controller-enabled", "--capacity-buffer-pod-injection-enabled")
	e.eventually(time.Minute, "the buffer ready with 16 replicas and its pods injected", func() error {
		got, err := buffers.Get(e.ctx, "warm", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var b cb.CapacityBuffer
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &b); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(b.Status.Conditions, cb.ReadyForProvisioning)
		prov := meta.FindStatusCondition(b.Status.Conditions, cb.Provisioning)
		if b.Status.Replicas == nil || *b.Status.Replicas != 16 || ready == nil || ready.Reason != cb.ReasonAttributesSetSuccessfully ||
			prov == nil || prov.Reason != cb.ReasonFakePodsInjected {
			return fmt.Errorf("status %+v", b.Status)
		}
		return nil
	})
	e.eventually(time.Minute, "2 nodes for the buffer", func() error {
		if n := len(e.groupNodes("buffer-gpu")); n != 2 {
			return fmt.Errorf("%d nodes", n)
		}
		return nil
	})
	// Unneeded after 2s were they empty: the buffer's room keeps them.
	e.consistently(8*time.Second, "the buffer's nodes stay", func() error {
		if n := len(e.groupNodes("buffer-gpu")); n != 2 {
			return fmt.Errorf("%d nodes, want 2", n)
		}
		return nil
	})
	e.eventually(30*time.Second, "TriggeredScaleUp on the buffer", func() error {
		evs, err := cp.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "reason=TriggeredScaleUp,involvedObject.name=warm"})
		if err != nil || len(evs.Items) == 0 {
			return fmt.Errorf("%d events (%v)", len(evs.Items), err)
		}
		return nil
	})
	// draxr simulate on the live cluster: the buffer's room is on the two
	// nodes now.
	groups := e.nodeGroups(groupSpec{name: "buffer-gpu", min: 0, max: 4, draDevices: 8})
	code, out, errOut := runDraxr(t, filepath.Join(bins, "draxr"), "simulate", "--kubeconfig", cp.AdminKubeconfig,
		"--node-group-config", groups, "-o", "json")
	if code != 0 {
		t.Fatalf("draxr simulate --kubeconfig: exit %d: %s", code, errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range plan.CapacityBuffers {
		if r.Namespace == e.ns && r.Name == "warm" {
			found = true
			if r.Replicas != 16 || r.KeptOnExistingNodes != 16 || len(r.OnNewNodes) != 0 {
				t.Errorf("draxr simulate --kubeconfig: buffer %+v, want 16 pods kept on the existing nodes", r)
			}
		}
	}
	if !found {
		t.Errorf("draxr simulate --kubeconfig lists no buffer warm: %+v", plan.CapacityBuffers)
	}
	pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("the namespace has %d pods (%v): buffer pods are never created", len(pods.Items), err)
	}
}
