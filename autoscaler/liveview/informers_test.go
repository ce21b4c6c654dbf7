package liveview

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// The live cache holds objects without their managedFields, as
// kube-scheduler's pod cache does, and pods without the volumes only the
// kubelet reads; the volumes scheduling or draining reads stay.
func TestInformerFactoryTrimsForPlanning(t *testing.T) {
	pod := fx.Pod("p", 100, nil)
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
	}
	f := NewInformerFactory(fake.NewClientset(pod))
	l := FromInformers(f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	got, err := l.Pods.Pods("default").Get("p")
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields != nil {
		t.Errorf("cached pod keeps managedFields %v", got.ManagedFields)
	}
	var names []string
	for _, v := range got.Spec.Volumes {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"scratch", "data"}) {
		t.Errorf("cached pod's volumes %v, want [scratch data] (a drain rule reads emptyDir, scheduling the claim)", names)
	}
}
