package placement

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// With DRAWorkloadResourceClaims a PodGroup's claim is made once for the
// group and reserved for it, as the resourceclaim controller and the
// scheduler do: the group's pods share one device however many there
// are, a pod that leaves does not free it, and a pod's own claims stay
// its own. With the gate off every pod gets a claim of its own.
func TestGroupClaims(t *testing.T) {
	build := func(t *testing.T) (*Engine, []*v1.Pod) {
		snap := snapshot.New()
		snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, fx.GPUResource, fx.Epoch))
		snap.SetDeviceClass(fx.Class("channel.example.com", "channel.example.com", "", fx.Epoch))
		snap.SetResourceClaimTemplate(fx.ClaimTemplate("channel", "channel.example.com", 1))
		snap.SetResourceClaimTemplate(fx.ClaimTemplate("gpu", gpuClass, 1))
		fabric := fx.DeviceSlice("fabric", "channel.example.com", 1, "channel")
		fabric.Spec.NodeName, fabric.Spec.AllNodes = nil, ptr.To(true)
		fabric.Spec.Pool.Name = "fabric"
		addNode(t, snap, "n1", nil, fx.GPUSlice("n1", 8), fabric)
		snap.SetPodGroups([]*schedulingapi.PodGroup{{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default", UID: "pg-train"},
			Spec: schedulingapi.PodGroupSpec{
				SchedulingPolicy: schedulingapi.PodGroupSchedulingPolicy{Gang: &schedulingapi.GangSchedulingPolicy{MinCount: 3}},
				ResourceClaims:   []schedulingapi.PodGroupResourceClaim{{Name: "channel", ResourceClaimTemplateName: ptr.To("channel")}},
			},
		}})
		h := newEngine(t, snap)
		var pods []*v1.Pod
		for _, name := range []string{"w0", "w1", "w2"} {
			pod := fx.WithTemplateClaim(fx.WithTemplateClaim(fx.Pod(name, 100, nil), "channel", "channel"), "gpu", "gpu")
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
			pods = append(pods, pod)
		}
		return h, pods
	}

	t.Run("gate on", func(t *testing.T) {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAWorkloadResourceClaims, true)
		h, pods := build(t)
		pods = h.GroupClaims(pods)
		var placed []*v1.Pod
		for _, pod := range pods {
			placed = append(placed, mustPlace(t, h, pod, "n1"))
		}
		var group *resourceapi.ResourceClaim
		for _, pod := range placed {
			claims := h.ClaimsOf(pod)
			if len(claims) != 2 {
				t.Fatalf("pod %s holds %d claims, want its GPU claim and the group's channel", pod.Name, len(claims))
			}
			for _, c := range claims {
				if c.Spec.Devices.Requests[0].Exactly.DeviceClassName != "channel.example.com" {
					if owner := metav1.GetControllerOf(c); owner == nil || owner.UID != pod.UID {
						t.Errorf("pod %s: GPU claim %s owned by %v, want the pod", pod.Name, c.Name, owner)
					}
					continue
				}
				if group != nil && c.Name != group.Name {
					t.Fatalf("pods hold channel claims %s and %s, want one for the group", group.Name, c.Name)
				}
				group = c
			}
		}
		if owner := metav1.GetControllerOf(group); owner == nil || owner.Kind != "PodGroup" || owner.Name != "train" {
			t.Errorf("group claim %s owned by %v, want PodGroup train", group.Name, owner)
		}
		if got := group.Status.ReservedFor; len(got) != 1 || got[0].Resource != "podgroups" || got[0].Name != "train" {
			t.Errorf("group claim reserved for %+v, want the PodGroup only", got)
		}
		if got := deviceNames(group); len(got) != 1 || got[0] != "channel.example.com/fabric/channel-0" {
			t.Errorf("group claim devices %v, want the one channel", got)
		}
		if _, err := h.Remove(placed[0].UID); err != nil {
			t.Fatal(err)
		}
		if c := h.snap.ResourceClaim("default", group.Name); c == nil || c.Status.Allocation == nil {
			t.Errorf("after w0 left, the group claim is %v; want it still allocated for the group", c)
		}
	})

	t.Run("gate off", func(t *testing.T) {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAWorkloadResourceClaims, false)
		h, pods := build(t)
		if got := h.GroupClaims(pods); &got[0] != &pods[0] {
			t.Errorf("GroupClaims changed the pods with the gate off")
		}
		mustPlace(t, h, pods[0], "n1")
		if _, ferr := h.Place(pods[1], "n1"); ferr == nil {
			t.Errorf("w1 placed with its own channel claim, but the cluster's one channel is w0's")
		}
	})
}
