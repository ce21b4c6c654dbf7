package view

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/input"
)

// A dump served through FromObjects reads back as the objects it holds,
// each kind by its lister, namespaced kinds by namespace too.
func TestFromObjectsServesTheObjects(t *testing.T) {
	pod := func(ns, name, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.PodSpec{NodeName: node}}
	}
	objs := &input.Objects{
		Nodes:                  []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}},
		RunningPods:            []*v1.Pod{pod("ml", "running", "n1")},
		PendingPods:            []*v1.Pod{pod("ml", "pending", ""), pod("web", "pending", "")},
		ResourceSlices:         []*resourceapi.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "s"}}},
		DeviceClasses:          []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}},
		ResourceClaims:         []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"}}},
		ResourceClaimTemplates: []*resourceapi.ResourceClaimTemplate{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "t"}}},
		DeviceTaintRules:       []*resourceapi.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "r"}}},
		DaemonSets:             []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "driver"}}},
		ProvisioningRequests:   []*prv1.ProvisioningRequest{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}}},
		PodTemplates:           []*v1.PodTemplate{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "worker"}}},
		ResourceQuotas:         []*v1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpus"}}},
		CapacityBuffers: []*capacitybuffer.CapacityBuffer{{
			TypeMeta:   metav1.TypeMeta{APIVersion: capacitybuffer.GroupVersionResource().GroupVersion().String(), Kind: "CapacityBuffer"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "warm"}, Spec: capacitybuffer.Spec{Replicas: ptr.To[int32](2)}}},
	}
	l, err := FromObjects(objs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind      string
		got, want any
	}{
		{"nodes", got.Nodes, objs.Nodes}, {"running pods", got.RunningPods, objs.RunningPods},
		{"pending pods", got.PendingPods, objs.PendingPods}, {"slices", got.ResourceSlices, objs.ResourceSlices},
		{"classes", got.DeviceClasses, objs.DeviceClasses}, {"claims", got.ResourceClaims, objs.ResourceClaims},
		{"templates", got.ResourceClaimTemplates, objs.ResourceClaimTemplates},
		{"taint rules", got.DeviceTaintRules, objs.DeviceTaintRules}, {"daemonsets", got.DaemonSets, objs.DaemonSets},
		{"provisioning requests", got.ProvisioningRequests, objs.ProvisioningRequests},
		{"pod templates", got.PodTemplates, objs.PodTemplates}, {"quotas", got.ResourceQuotas, objs.ResourceQuotas},
		{"capacity buffers", got.CapacityBuffers, objs.CapacityBuffers},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: read back %v, want %v", c.kind, c.got, c.want)
		}
	}
	if web, err := l.Pods.Pods("web").List(labels.Everything()); err != nil || len(web) != 1 {
		t.Errorf("pods of namespace web: %v, %v; want the one", web, err)
	}
	if n, err := l.Nodes.Get("n2"); err != nil || n != objs.Nodes[1] {
		t.Errorf("node n2: %v, %v", n, err)
	}
	// The loop's drain reads PodDisruptionBudgets: a dump serves none.
	if pdbs, err := l.PDBs.List(labels.Everything()); err != nil || len(pdbs) != 0 {
		t.Errorf("PodDisruptionBudgets of a dump: %v, %v; want none", pdbs, err)
	}
}

// Objects an API server could not hold together are errors naming them.
func TestFromObjectsRefusesWhatNoServerHolds(t *testing.T) {
	for _, c := range []struct {
		name string
		objs *input.Objects
		want string
	}{
		{"two pods of one name", &input.Objects{RunningPods: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}}},
			PendingPods: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}}}},
			"Pod ml/p: metadata.name: two objects of this name"},
		{"a node without a name", &input.Objects{Nodes: []*v1.Node{{}}}, "a Node: metadata.name is empty"},
		{"a claim without a name", &input.Objects{ResourceClaims: []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ml"}}}},
			"a ResourceClaim in namespace ml: metadata.name is empty"},
	} {
		if _, err := FromObjects(c.objs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
