package scaleup

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/expander"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// draGroup is a group of 64-CPU nodes whose driver publishes devices GPUs.
func draGroup(name string, devices, maxSize int) *nodegroup.NodeGroup {
	slice := fx.GPUSlice("x", devices)
	return &nodegroup.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodegroup.Spec{MinSize: 0, MaxSize: maxSize,
			Template:       *fx.Node("template", 64, 256, nil),
			ResourceSlices: []resourceapi.ResourceSliceSpec{slice.Spec}},
	}
}

func devicePluginGroup(name string, gpus int64, maxSize int) *nodegroup.NodeGroup {
	return &nodegroup.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodegroup.Spec{MinSize: 0, MaxSize: maxSize,
			Template: *fx.Node("template", 64, 256, fx.GPUs(fx.GPUResource, gpus))},
	}
}

// replicas makes n identical pods owned by one controller.
func replicas(prefix string, n int, milliCPU int64, extended v1.ResourceList) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := fx.Pod(fmt.Sprintf("%s-%d", prefix, i), milliCPU, extended)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: prefix,
			UID: types.UID("rs-" + prefix), Controller: ptr.To(true)}}
		pods[i] = p
	}
	return pods
}

func newPlanner(t testing.TB, snap *snapshot.Snapshot, groups ...*nodegroup.NodeGroup) *Planner {
	t.Helper()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := expander.New("least-waste", nil, 1)
	return &Planner{Engine: eng, Groups: groups, Expander: exp}
}

func TestPlanCountsDRADevices(t *testing.T) {
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 100))
	plan, err := p.Plan(replicas("train", 64, 500, fx.GPUs(fx.GPUResource, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != 8 || len(plan.ScaleUps[0].Pods) != 64 {
		t.Fatalf("plan = %+v, want gpu-dra +8 nodes for 64 pods", plan.ScaleUps)
	}
	perNode := map[string]int{}
	devices := map[string]bool{}
	for _, pl := range plan.ScaleUps[0].Placements {
		perNode[pl.Node]++
		for _, d := range pl.Devices {
			if devices[d] {
				t.Fatalf("device %s given twice", d)
			}
			devices[d] = true
		}
	}
	for node, n := range perNode {
		if n != 8 {
			t.Errorf("node %s got %d pods, want 8", node, n)
		}
	}
	if len(devices) != 64 {
		t.Errorf("%d distinct devices allocated, want 64", len(devices))
	}
}

func TestPlanReasons(t *testing.T) {
	p := newPlanner(t, snapshot.New(), draGroup("gpu-dra", 8, 2), devicePluginGroup("gpu-dp", 2, 1))
	pods := append(replicas("big", 1, 100, fx.GPUs(fx.GPUResource, 9)), replicas("small", 20, 100, fx.GPUs(fx.GPUResource, 1))...)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, su := range plan.ScaleUps {
		got[su.NodeGroup] = su.NewNodes
	}
	if got["gpu-dra"] != 2 || got["gpu-dp"] != 1 {
		t.Fatalf("scale-ups = %v, want gpu-dra +2, gpu-dp +1", got)
	}
	reasons := map[string]string{}
	codes := map[string]ReasonCode{}
	for _, n := range plan.NoScaleUp {
		reasons[n.Pod.String()] = n.Reason
		codes[n.Pod.String()] = n.Code
	}
	for pod, code := range codes {
		want := MaxSizeReached
		if pod == "default/big-0" {
			want = InsufficientResource
		}
		if code != want {
			t.Errorf("%s: code %s, want %s", pod, code, want)
		}
	}
	if len(plan.NoScaleUp) != 1+2 {
		t.Fatalf("noScaleUp = %+v, want the big pod and 2 small ones", plan.NoScaleUp)
	}
	if r := reasons["default/big-0"]; !strings.Contains(r, "needs 9 example.com/gpu; a gpu-dra node offers 8") ||
		!strings.Contains(r, "needs 9 example.com/gpu; a gpu-dp node offers 2") {
		t.Errorf("big pod reason = %q", r)
	}
	for pod, r := range reasons {
		if strings.HasPrefix(pod, "default/small") && (!strings.Contains(r, "node group gpu-dra is at max size 2") || !strings.Contains(r, "node group gpu-dp is at max size 1")) {
			t.Errorf("%s reason = %q, want both groups at max size", pod, r)
		}
	}
}

// Alike groups share one estimate, unless pods pick a group by name.
func TestAlikeGroupsDifferWhenPodsSelectByGroup(t *testing.T) {
	p := newPlanner(t, snapshot.New(), draGroup("gpu-a", 8, 10), draGroup("gpu-b", 8, 10))
	pods := replicas("pinned", 10, 100, fx.GPUs(fx.GPUResource, 1))
	for _, pod := range pods {
		pod.Spec.NodeSelector = map[string]string{nodegroup.GroupLabel: "gpu-b"}
	}
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "gpu-b" || plan.ScaleUps[0].NewNodes != 2 {
		t.Fatalf("scale-ups = %+v, want gpu-b +2", plan.ScaleUps)
	}
	if len(plan.NoScaleUp) != 0 {
		t.Fatalf("noScaleUp = %+v", plan.NoScaleUp)
	}
}
