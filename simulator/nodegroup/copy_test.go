package nodegroup_test

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

// liveSlices is an 8-GPU DynamicMIG H100 node whose gpu-3 NVIDIA's
// driver tainted for an XID error, with 8 Gaudi 3 of which one is marked
// unhealthy by Intel's driver.
func liveSlices() []*resourceapi.ResourceSlice {
	slices := fx.NVIDIADynamicMIG("gpu-node-1", 8)
	for _, s := range slices {
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == "gpu-3" {
				s.Spec.Devices[i].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			}
		}
	}
	gaudi := fx.GaudiSlice("gpu-node-1", 8)
	gaudi.Spec.Devices[2].Attributes["healthy"] = resourceapi.DeviceAttribute{BoolValue: ptr.To(false)}
	return append(slices, gaudi)
}

// placed is how many one-device pods of className a new node of a group
// whose template has specs takes.
func placed(t *testing.T, specs []resourceapi.ResourceSliceSpec, className string) int {
	t.Helper()
	g := &nodegroup.NodeGroup{}
	g.Name = "h100"
	g.Spec.Template = *fx.H100Node("template")
	g.Spec.ResourceSlices = specs
	node, slices := g.NewNode("h100-new-1")
	snap := snapshot.New()
	for _, c := range fx.NVIDIAClasses() {
		snap.SetDeviceClass(c)
	}
	healthy := fx.DriverClass("gaudi.intel.com")
	healthy.Spec.Selectors[0].CEL.Expression += ` && device.attributes["gaudi.intel.com"].healthy`
	snap.SetDeviceClass(healthy)
	snap.SetResourceClaimTemplate(fx.ClaimTemplate("one", className, 1))
	if err := snap.AddNode(node); err != nil {
		t.Fatal(err)
	}
	for _, s := range slices {
		if err := snap.AddResourceSlice(s); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 9 {
		pod := fx.WithTemplateClaim(fx.Pod(fmt.Sprintf("p-%d", i), 100, nil), "dev", "one")
		if _, ferr := eng.Place(pod, node.Name); ferr == nil {
			n++
		}
	}
	return n
}

// A template copied from a node with a tainted GPU and an unhealthy Gaudi
// gives new nodes all 8 GPUs and all 8 Gaudis; copied as published, they
// would be one short each.
func TestCopiedTemplateDropsHealthState(t *testing.T) {
	raw := func() []resourceapi.ResourceSliceSpec {
		var out []resourceapi.ResourceSliceSpec
		for _, s := range liveSlices() {
			spec := s.Spec.DeepCopy()
			spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
			out = append(out, *spec)
		}
		return out
	}
	copied := nodegroup.CopySliceSpecs(liveSlices())
	for _, class := range []string{"gpu.nvidia.com", "gaudi.intel.com"} {
		if got := placed(t, raw(), class); got != 7 {
			t.Errorf("%s: a template kept as published takes %d pods, want 7 (the pitfall this guards against)", class, got)
		}
		if got := placed(t, copied, class); got != 8 {
			t.Errorf("%s: a copied template takes %d pods, want 8", class, got)
		}
	}
	// What names one machine is kept: selectors may read it.
	var uuid, serial string
	for _, s := range copied {
		for _, d := range s.Devices {
			if d.Name == "gpu-0" {
				uuid = *d.Attributes["uuid"].StringValue
			}
			if s.Driver == "gaudi.intel.com" && serial == "" {
				serial = *d.Attributes["serial"].StringValue
			}
		}
		if s.NodeName != nil || s.Pool.Name != "" {
			t.Errorf("copied spec of %s keeps nodeName %v, pool %q", s.Driver, s.NodeName, s.Pool.Name)
		}
	}
	if uuid != "GPU-gpu-node-1-0" || serial != "HL3-gpu-node-1-0" {
		t.Errorf("uuid %q, serial %q: identifying attributes changed", uuid, serial)
	}
}

// A pool caught mid-update (two generations) is copied once, its newest.
func TestCopiedTemplateTakesNewestGeneration(t *testing.T) {
	old := fx.GPUSlice("n1", 8)
	old.Name = "n1-old"
	newer := fx.GPUSlice("n1", 4)
	newer.Spec.Pool.Generation = 2
	specs := nodegroup.CopySliceSpecs([]*resourceapi.ResourceSlice{old, newer})
	if len(specs) != 1 || len(specs[0].Devices) != 4 {
		t.Errorf("copied %d specs (devices of the first: %d), want the generation-2 slice's 4 devices", len(specs), len(specs[0].Devices))
	}
}

// A network-attached pool (allNodes, or a nodeSelector) is not the node's
// own, even when its devices bind to the node using them (bindsToNode,
// KEP-5007): a new machine brings none of its devices, so a template
// copied from a node that can reach it leaves it out.
func TestCopiedTemplateLeavesSharedPoolsOut(t *testing.T) {
	own := fx.GPUSlice("n1", 8)
	fabric := fx.DeviceSlice("", "fabric.example.com", 4, "gpu")
	fabric.Spec.NodeName, fabric.Spec.AllNodes = nil, ptr.To(true)
	for i := range fabric.Spec.Devices {
		fabric.Spec.Devices[i].BindsToNode = ptr.To(true)
		fabric.Spec.Devices[i].BindingConditions = []string{"Attached"}
	}
	specs := nodegroup.CopySliceSpecs([]*resourceapi.ResourceSlice{own, fabric})
	if len(specs) != 1 || specs[0].Driver != fx.Driver || len(specs[0].Devices) != 8 {
		t.Errorf("copied %+v, want the node's own 8 GPUs only", specs)
	}
}
