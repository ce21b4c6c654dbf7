package scaleup

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/snapshot"
)

// The NVLink clique label GPU Feature Discovery sets, and NVIDIA's
// ComputeDomain channel: one "channel" device per node from the
// compute-domain driver, claimed by every pod of a ComputeDomain.
const (
	cliqueKey          = "nvidia.com/gpu.clique"
	computeDomainClass = "compute-domain-default-channel.nvidia.com"
	computeDomainDrv   = "compute-domain.nvidia.com"
)

// channelSlice is the compute-domain driver's slice on node: its channel
// devices (channel 0 is the one ComputeDomain claims ask for).
func channelSlice(node string) *resourceapi.ResourceSlice {
	s := fx.DeviceSlice(node, computeDomainDrv, 1, "channel")
	s.Name = node + "-" + computeDomainDrv
	s.Spec.Devices[0].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": {StringValue: ptr.To("channel")}, "id": {IntValue: ptr.To[int64](0)}}
	return s
}

// cliqueGroup is a GB200-style group: 4-GPU nodes whose GPUs NVIDIA's
// driver publishes with DynamicMIG, a ComputeDomain channel on each, in
// NVLink clique clique (up to 18 nodes: an NVL72 rack).
func cliqueGroup(name, clique string, maxSize int) *nodegroup.NodeGroup {
	var specs []resourceapi.ResourceSliceSpec
	for _, s := range append(fx.NVIDIADynamicMIG("template", 4), channelSlice("template")) {
		specs = append(specs, s.Spec)
	}
	tmpl := *fx.Node("template", 72, 480, nil)
	tmpl.Labels[cliqueKey] = clique
	return &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nodegroup.Spec{MaxSize: maxSize, Template: tmpl, ResourceSlices: specs}}
}

// A 64-GPU gang of 16 pods, each 4 whole GPUs and the ComputeDomain's
// channel, must run in one NVLink clique: clique a has 10 nodes of its 18
// and room for 8 more (32 GPUs), clique b is empty; the gang gets 16 nodes
// of clique b, none of a, and each pod a channel of its own node.
func TestNVLinkCliqueGang(t *testing.T) {
	snap := snapshot.New()
	migSetup(snap)
	channel := fx.Class(computeDomainClass, computeDomainDrv, "", fx.Epoch)
	snap.SetDeviceClass(channel)
	gpus := fx.ClaimTemplate("four-gpus", "gpu.nvidia.com", 4)
	gpus.Namespace = "default"
	snap.SetResourceClaimTemplate(gpus)
	ch := fx.ClaimTemplate("cd-channel", computeDomainClass, 1)
	ch.Namespace = "default"
	snap.SetResourceClaimTemplate(ch)
	for i := range 10 {
		name := fmt.Sprintf("a-%d", i)
		n := fx.Node(name, 72, 480, nil)
		n.Labels[nodegroup.GroupLabel], n.Labels[cliqueKey] = "clique-a", "fabric-1.a"
		n.Spec.Unschedulable = true // busy: no room for the gang
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	p := newPlanner(t, snap, cliqueGroup("clique-a", "fabric-1.a", 18), cliqueGroup("clique-b", "fabric-1.b", 18))
	var pods []*v1.Pod
	for i := range 16 {
		pod := fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("train-%02d", i), 4000, nil), "gpus", "four-gpus")
		pod = fx.WithTemplateClaim(pod, "channel", "cd-channel")
		pods = append(pods, pod)
	}
	pods = inGroup("train", pods)
	pg := gangGroup("train", 16)
	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: cliqueKey}}}
	p.Gangs = gang.NewIndex(gang.Sources{PodGroups: []*schedulingv1beta1.PodGroup{pg}}, pods)
	plan, err := p.Plan(pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NoScaleUp) != 0 || len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "clique-b" || plan.ScaleUps[0].NewNodes != 16 ||
		plan.ScaleUps[0].Topology == nil || plan.ScaleUps[0].Topology.String() != cliqueKey+"=fabric-1.b" {
		t.Fatalf("scale-ups %+v, refused %+v; want clique-b +16 in %s=fabric-1.b", plan.ScaleUps, plan.NoScaleUp, cliqueKey)
	}
	for _, pl := range plan.ScaleUps[0].Placements {
		gpus, channels := 0, 0
		for _, d := range pl.Devices {
			switch {
			case strings.HasPrefix(d, fx.NVIDIADriver+"/"+pl.Node+"/gpu-"):
				gpus++
			case d == computeDomainDrv+"/"+pl.Node+"/channel-0":
				channels++
			}
		}
		if gpus != 4 || channels != 1 {
			t.Errorf("pod %s on %s: devices %v, want 4 GPUs and the node's channel", pl.Pod, pl.Node, pl.Devices)
		}
	}
}
