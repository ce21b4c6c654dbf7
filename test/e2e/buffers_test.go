package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

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
	e.grantBatch("capacity-buffer-pod-injection-enabled", 7)
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
	// A buffer naming a Deployment (of no replicas, and none for the
	// buffer): CA's controller keeps its pods' PodTemplate,
	// capacitybuffer-<name>-pod-template, owned by the buffer.
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "serve", Image: "serve:1"}}}}}}
	if _, err := cp.Client.AppsV1().Deployments(e.ns).Create(e.ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scalable := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cb.Group + "/" + cb.Version, "kind": cb.Kind,
		"metadata": map[string]any{"name": "web-room", "namespace": e.ns},
		"spec":     map[string]any{"scalableRef": map[string]any{"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "replicas": 0},
	}}
	if _, err := buffers.Create(e.ctx, scalable, metav1.CreateOptions{}); err != nil {
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
	managed := func() (*v1.PodTemplate, error) {
		tmpl, err := cp.Client.CoreV1().PodTemplates(e.ns).Get(e.ctx, "capacitybuffer-web-room-pod-template", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if refs := tmpl.OwnerReferences; len(refs) != 1 || refs[0].Kind != cb.Kind || refs[0].Name != "web-room" ||
			len(tmpl.Template.Spec.Containers) != 1 || tmpl.Template.Spec.Containers[0].Image != "serve:1" {
			return nil, fmt.Errorf("template %+v", tmpl)
		}
		got, err := buffers.Get(e.ctx, "web-room", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if name, _, _ := unstructured.NestedString(got.Object, "status", "podTemplateRef", "name"); name != tmpl.Name {
			return nil, fmt.Errorf("buffer web-room's status.podTemplateRef %q, want %s", name, tmpl.Name)
		}
		return tmpl, nil
	}
	var version string
	e.eventually(time.Minute, "the managed PodTemplate of buffer web-room", func() error {
		tmpl, err := managed()
		if err == nil {
			version = tmpl.ResourceVersion
		}
		return err
	})
	// Unneeded after 2s were they empty: the buffer's room keeps them.
	// The managed template, the API server's defaults and all, is not
	// written again loop after loop.
	e.consistently(8*time.Second, "the buffer's nodes stay, the managed template unchanged", func() error {
		if n := len(e.groupNodes("buffer-gpu")); n != 2 {
			return fmt.Errorf("%d nodes, want 2", n)
		}
		tmpl, err := managed()
		if err != nil {
			return err
		}
		if tmpl.ResourceVersion != version {
			return fmt.Errorf("the managed template was written again (resourceVersion %s, was %s)", tmpl.ResourceVersion, version)
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
