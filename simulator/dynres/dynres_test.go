package dynres

import (
	"context"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/snapshot"
)

func TestForNode(t *testing.T) {
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	snap.SetDeviceClass(fx.Class("nic.example.com", "nic.example.com", "", fx.Epoch))
	add := func(n *v1.Node, slices ...*resourceapi.ResourceSlice) {
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
		for _, s := range slices {
			if err := snap.AddResourceSlice(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(fx.Node("dra", 8, 32, nil), fx.GPUSlice("dra", 8), fx.DeviceSlice("dra", "nic.example.com", 2, "nic"))
	add(fx.Node("plugin", 8, 32, fx.GPUs(fx.GPUResource, 2)))
	// Allocatable wins: NodeResourcesFit leaves the name to DRA only at 0.
	add(fx.Node("both", 8, 32, fx.GPUs(fx.GPUResource, 4)), fx.GPUSlice("both", 8))

	eng, err := placement.New(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, ferr := eng.Place(fx.Pod(name, 100, fx.GPUs(fx.GPUResource, 1)), "dra"); ferr != nil {
			t.Fatal(ferr)
		}
	}
	m := NewMatcher()
	tests := []struct {
		node string
		want []string
	}{
		{"dra", []string{
			"deviceclass.resource.kubernetes.io/gpu.example.com: 8 (DRA, DeviceClass gpu.example.com) free 5",
			"deviceclass.resource.kubernetes.io/nic.example.com: 2 (DRA, DeviceClass nic.example.com) free 2",
			"example.com/gpu: 8 (DRA, DeviceClass gpu.example.com) free 5",
		}},
		{"plugin", []string{"example.com/gpu: 2 (device plugin) free 2"}},
		{"both", []string{
			"deviceclass.resource.kubernetes.io/gpu.example.com: 8 (DRA, DeviceClass gpu.example.com) free 8",
			"example.com/gpu: 4 (device plugin) free 4",
		}},
	}
	for _, tc := range tests {
		var got []string
		for _, e := range m.ForNode(snap, tc.node) {
			got = append(got, e.String()+" free "+strconv.FormatInt(e.Free, 10))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("node %s:\n got %q\nwant %q", tc.node, got, tc.want)
		}
	}
}

func TestClassError(t *testing.T) {
	c := fx.Class("broken", fx.Driver, "", fx.Epoch)
	c.Spec.Selectors[0].CEL.Expression = "device.driver ==== 1"
	err := NewMatcher().ClassError(c)
	if err == nil || !strings.Contains(err.Error(), "DeviceClass broken: spec.selectors[0].cel.expression does not compile") {
		t.Fatalf("ClassError = %v", err)
	}
}

// The matcher compiles selectors with the CEL features the scheduler's
// DynamicResources plugin takes from the gates in force, not a fixed set,
// so doctor and reports judge selectors as the scheduler does.
func TestCELFeaturesFollowGates(t *testing.T) {
	if f := CELFeatures(); !f.EnableConsumableCapacity || f.EnableListTypeAttributes {
		t.Errorf("defaults: %+v, want consumable capacity (beta, on) without list-type attributes (alpha, off)", f)
	}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAListTypeAttributes, true)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAConsumableCapacity, false)
	if f := CELFeatures(); f.EnableConsumableCapacity || !f.EnableListTypeAttributes {
		t.Errorf("gates flipped: %+v, want list-type attributes without consumable capacity", f)
	}
	c := fx.Class("ids", fx.Driver, "", fx.Epoch)
	c.Spec.Selectors[0].CEL.Expression = `device.attributes["dra.example.com"].name.includes("fish")`
	if err := NewMatcher().ClassError(c); err != nil {
		t.Errorf("list-type selector with DRAListTypeAttributes on: %v", err)
	}
}
