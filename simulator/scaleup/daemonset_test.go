package scaleup

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

func daemonSet(name string, milliCPU int64, extended v1.ResourceList, nodeSelector map[string]string) *appsv1.DaemonSet {
	tmpl := fx.Pod("tmpl", milliCPU, extended)
	tmpl.Spec.NodeSelector = nodeSelector
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID("ds-" + name)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: tmpl.Spec},
		},
	}
}

// limitsOnly drops the requests: pod creation sets them from the limits.
func limitsOnly(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	for i := range ds.Spec.Template.Spec.Containers {
		ds.Spec.Template.Spec.Containers[i].Resources.Requests = nil
	}
	return ds
}

// Each new node runs the DaemonSet pods that match it, so they take room
// (CPU or a GPU) before pending pods, as on a real node.
func TestDaemonSetPodsTakeRoomOnNewNodes(t *testing.T) {
	gpu := fx.GPUs(fx.GPUResource, 1)
	tests := []struct {
		name      string
		sets      []*appsv1.DaemonSet
		wantNodes int
	}{
		{name: "no DaemonSet: 15 one-GPU pods on 8-GPU nodes", wantNodes: 2},
		{name: "a GPU DaemonSet leaves 7 GPUs a node", wantNodes: 3,
			sets: []*appsv1.DaemonSet{daemonSet("gpu-monitor", 10, gpu, nil)}},
		{name: "a CPU DaemonSet that leaves too little CPU", wantNodes: 3,
			// 64-CPU nodes; 8 pods of 7.5 CPU need 60: with 6 CPU taken only 7 fit.
			sets: []*appsv1.DaemonSet{daemonSet("logger", 6000, nil, nil)}},
		{name: "a GPU DaemonSet giving limits only", wantNodes: 3,
			sets: []*appsv1.DaemonSet{limitsOnly(daemonSet("gpu-monitor", 10, gpu, nil))}},
		{name: "a DaemonSet for other nodes takes nothing", wantNodes: 2,
			sets: []*appsv1.DaemonSet{daemonSet("gpu-monitor", 10, gpu, map[string]string{"pool": "other"})}},
		{name: "a DaemonSet pod too big for the node is left out", wantNodes: 2,
			sets: []*appsv1.DaemonSet{daemonSet("huge", 100000, nil, nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(t, snapshot.New(), draGroup("gpu", 8, 10))
			p.DaemonSets = tc.sets
			plan, err := p.Plan(replicas("train", 15, 7500, gpu))
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != tc.wantNodes || len(plan.NoScaleUp) != 0 {
				t.Fatalf("plan = %+v, noScaleUp %+v; want gpu +%d for all 15 pods", plan.ScaleUps, plan.NoScaleUp, tc.wantNodes)
			}
			for _, pl := range plan.ScaleUps[0].Placements {
				for _, d := range pl.Devices {
					if d == "gpu.example.com/"+pl.Node+"/gpu-0" && len(tc.sets) == 1 && tc.wantNodes == 3 && tc.sets[0].Name == "gpu-monitor" {
						t.Errorf("pod %s got gpu-0 of %s, which the DaemonSet pod holds", pl.Pod, pl.Node)
					}
				}
			}
		})
	}
}

// DaemonSet pods whose devices come through claims (CA's open #7684): a
// claim template of one GPU takes a device of every new node; an
// admin-access claim of all of them (a monitoring agent) takes none.
func TestDaemonSetClaimsOnNewNodes(t *testing.T) {
	withClaim := func(ds *appsv1.DaemonSet, template string) *appsv1.DaemonSet {
		pod := &v1.Pod{Spec: ds.Spec.Template.Spec}
		fx.WithTemplateClaim(pod, "gpu", template)
		ds.Spec.Template.Spec = pod.Spec
		return ds
	}
	one := fx.ClaimTemplate("one-gpu", "gpu.example.com", 1)
	admin := fx.ClaimTemplate("all-gpus-admin", "gpu.example.com", 1)
	admin.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	admin.Spec.Spec.Devices.Requests[0].Exactly.Count = 0
	admin.Spec.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
	for _, tc := range []struct {
		name      string
		ds        *appsv1.DaemonSet
		wantNodes int
	}{
		{"a claim template of one GPU leaves 7 a node", withClaim(daemonSet("validator", 10, nil, nil), "one-gpu"), 3},
		{"an admin-access claim of every GPU takes none", withClaim(daemonSet("dcgm", 10, nil, nil), "all-gpus-admin"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot.New()
			for _, tmpl := range []*resourceapi.ResourceClaimTemplate{one, admin} {
				tmpl = tmpl.DeepCopy()
				tmpl.Namespace = "kube-system"
				snap.SetResourceClaimTemplate(tmpl)
			}
			p := newPlanner(t, snap, draGroup("gpu", 8, 10))
			p.DaemonSets = []*appsv1.DaemonSet{tc.ds}
			plan, err := p.Plan(replicas("train", 15, 7500, fx.GPUs(fx.GPUResource, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NewNodes != tc.wantNodes || len(plan.NoScaleUp) != 0 {
				t.Fatalf("plan = %+v, noScaleUp %+v; want gpu +%d for all 15 pods", plan.ScaleUps, plan.NoScaleUp, tc.wantNodes)
			}
		})
	}
}
