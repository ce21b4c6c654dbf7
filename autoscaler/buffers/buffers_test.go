package buffers

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	cb "draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/view"
)

// A buffer naming a Deployment gets the PodTemplate CA's controller keeps
// for it (capacitybuffer-<name>-pod-template, owned by the buffer), its
// status names that template, and its pods are the Deployment's; a
// steady loop writes the template no more, and a changed Deployment
// updates it once.
func TestManagedPodTemplate(t *testing.T) {
	f := newBufferFixture(t, false)
	ctx := context.Background()
	l := f.run(t)
	if n := f.writes("create"); n != 1 {
		t.Fatalf("%d PodTemplate creates, want 1: %v", n, f.client.Actions())
	}
	got, err := f.client.CoreV1().PodTemplates("ml").Get(ctx, "capacitybuffer-warm-pod-template", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := got.OwnerReferences; len(refs) != 1 || refs[0].Kind != cb.Kind || refs[0].Name != "warm" || refs[0].UID != "buffer-uid" || !ptr.Deref(refs[0].Controller, false) {
		t.Errorf("template owners %+v, want the buffer warm as controller", refs)
	}
	if img := got.Template.Spec.Containers[0].Image; img != "serve:1" {
		t.Errorf("template image %q, want the Deployment's serve:1", img)
	}
	b := f.status[len(f.status)-1]
	if b.Status.PodTemplateRef == nil || b.Status.PodTemplateRef.Name != "capacitybuffer-warm-pod-template" || b.Status.PodTemplateGeneration == nil {
		t.Errorf("status podTemplateRef %+v, generation %v; want the managed template", b.Status.PodTemplateRef, b.Status.PodTemplateGeneration)
	}
	if len(l.Pods) != 2 || l.Pods[0].Spec.Containers[0].Image != "serve:1" {
		t.Fatalf("%d pods, want 2 of the Deployment's", len(l.Pods))
	}

	f.waitTemplate(t, "serve:1")
	f.client.ClearActions()
	f.run(t)
	if n := f.writes("create") + f.writes("update"); n != 0 {
		t.Errorf("a steady loop wrote the template %d times: %v", n, f.client.Actions())
	}

	f.deployment.Spec.Template.Spec.Containers[0].Image = "serve:2"
	if err := f.deployments.Update(f.deployment); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	l = f.run(t)
	if n := f.writes("update"); n != 1 {
		t.Errorf("%d template updates after the Deployment changed, want 1: %v", n, f.client.Actions())
	}
	if len(l.Pods) != 2 || l.Pods[0].Spec.Containers[0].Image != "serve:2" {
		t.Errorf("pods %d, want 2 of the changed Deployment's", len(l.Pods))
	}
}

// A dry run writes no template, and serves the buffer as if it had.
func TestManagedPodTemplateDryRun(t *testing.T) {
	f := newBufferFixture(t, true)
	l := f.run(t)
	if n := f.writes("create") + f.writes("update"); n != 0 {
		t.Errorf("a dry run wrote the template %d times: %v", n, f.client.Actions())
	}
	if len(l.Pods) != 2 {
		t.Errorf("%d pods, want the buffer's 2", len(l.Pods))
	}
}

type bufferFixture struct {
	client      *fake.Clientset
	cfg         Config
	deployment  *appsv1.Deployment
	deployments cache.Indexer
	status      []*cb.CapacityBuffer
}

type recordingWriter struct{ f *bufferFixture }

func (w recordingWriter) UpdateStatus(_ context.Context, b *cb.CapacityBuffer) error {
	w.f.status = append(w.f.status, b.DeepCopy())
	return nil
}

func newBufferFixture(t *testing.T, dryRun bool) *bufferFixture {
	t.Helper()
	f := &bufferFixture{client: fake.NewClientset()}
	factory := informers.NewSharedInformerFactory(f.client, 0)
	templates := factory.Core().V1().PodTemplates()
	templates.Informer()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	f.deployment = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "serve", Image: "serve:1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}}}
	f.deployments = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := f.deployments.Add(f.deployment); err != nil {
		t.Fatal(err)
	}
	buffer := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "ml", UID: "buffer-uid"},
		Spec: cb.Spec{ScalableRef: &cb.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Replicas: ptr.To[int32](2)}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(buffer)
	if err != nil {
		t.Fatal(err)
	}
	buffers := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := buffers.Add(&unstructured.Unstructured{Object: obj}); err != nil {
		t.Fatal(err)
	}
	writer := NewTemplateWriter(f.client, templates.Lister())
	if dryRun {
		writer = DryRunTemplates(templates.Lister())
	}
	f.cfg = Config{Cluster: view.View{CapacityBuffers: cache.NewGenericLister(buffers, cb.GroupVersionResource().GroupResource()),
		PodTemplates: templates.Lister(), Deployments: appslisters.NewDeploymentLister(f.deployments)}, Templates: writer,
		Client: recordingWriter{f}, Controller: true, Injection: true}
	return f
}

func (f *bufferFixture) run(t *testing.T) *Loop {
	t.Helper()
	l, err := Run(context.Background(), f.cfg, &input.Objects{}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Errors) > 0 {
		t.Fatalf("loop errors: %v", l.Errors)
	}
	return l
}

func (f *bufferFixture) writes(verb string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "podtemplates" {
			n++
		}
	}
	return n
}

// waitTemplate waits for the informer to hold the template with image.
func (f *bufferFixture) waitTemplate(t *testing.T, image string) {
	t.Helper()
	for range 200 {
		if got, err := f.cfg.Cluster.PodTemplates.PodTemplates("ml").Get("capacitybuffer-warm-pod-template"); err == nil && got.Template.Spec.Containers[0].Image == image {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the informer never held the template with %s", image)
}
