package live

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"draxr.dev/draxr/simulator/input"
)

// A dump served through ListersOf reads back as the objects it holds,
// each kind by its lister, namespaced kinds by namespace too.
func TestListersOfServeTheObjects(t *testing.T) {
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
	}
	l, err := ListersOf(objs)
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
}

// Objects an API server could not hold together are errors naming them.
func TestListersOfRefuseWhatNoServerHolds(t *testing.T) {
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
		if _, err := ListersOf(c.objs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
