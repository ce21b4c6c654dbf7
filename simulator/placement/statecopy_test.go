package placement

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// stateCopyCluster is two 8-GPU nodes, node-1 tainted when asked, each
// with one pod holding a claim of its own, and a copier.
func stateCopyCluster(t *testing.T, taint bool) (*Engine, *StateCopies) {
	t.Helper()
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class(gpuClass, fx.Driver, "", fx.Epoch))
	h := newEngine(t, snap)
	for i := range 2 {
		name := fmt.Sprintf("node-%d", i)
		addNode(t, snap, name, nil, fx.GPUSlice(name, 8))
		mustPlace(t, h, claimPod(snap, fmt.Sprintf("run-%d", i)), name)
		if taint && i == 1 {
			snap.NodeInfo(name).Node().Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
		}
	}
	c := h.NewStateCopies()
	if c == nil {
		t.Fatal("no copier for nodes of their own pools and pods without inter-pod terms")
	}
	return h, c
}

// claimPod is a pending pod with a one-GPU claim of its own.
func claimPod(snap *snapshot.Snapshot, name string) *v1.Pod {
	claim := fx.Claim(name+"-gpu", gpuClass, 1)
	snap.SetResourceClaim(claim)
	return fx.WithClaim(fx.Pod(name, 100, nil), "gpu", claim.Name)
}

// A placement learned on one node is copied onto a node in the same state
// with the devices the scheduler's plugins give there; a node whose shape
// differs (a taint) has another state.
func TestStateCopyIsThePlacement(t *testing.T) {
	t.Setenv(VerifyShortcutsEnv, "1")
	h, c := stateCopyCluster(t, false)
	key := c.Key("node-0")
	if key == "" || c.Key("node-1") != key {
		t.Fatalf("keys %q and %q, want one state for identical nodes with one pod each", key, c.Key("node-1"))
	}
	placed := mustPlace(t, h, claimPod(h.Snapshot(), "a"), "node-0")
	c.Learn(placed, "kind", key, "node-0")
	copied := c.Place(claimPod(h.Snapshot(), "b"), "kind", key, "node-1")
	if copied == nil || copied.Spec.NodeName != "node-1" {
		t.Fatalf("copied %v, want b on node-1", copied)
	}
	want := []string{"devices=" + fx.Driver + "/node-1/gpu-1"}
	if got := h.devicesOf(copied); !slices.Equal(got, want) {
		t.Errorf("b holds %v, want %v", got, want)
	}
	if c.Key("node-1") == key || c.Key("node-1") != c.Key("node-0") {
		t.Errorf("node-1's state %q once b runs there, want node-0's %q with a, not %q", c.Key("node-1"), c.Key("node-0"), key)
	}
	_, tainted := stateCopyCluster(t, true)
	if tainted.Key("node-0") == tainted.Key("node-1") {
		t.Errorf("a tainted node has the state of an untainted one")
	}
}

// A copy used where its precondition does not hold (the caller hands the
// state of node-0 for node-1, which is tainted) goes through unnoticed
// without the switch; with it, the full path rejects the pod and the
// process stops.
func TestVerifyShortcutsCatchesAStateCopyTheSchedulerRejects(t *testing.T) {
	copyOntoTainted := func() (stopped string, placed *v1.Pod) {
		h, c := stateCopyCluster(t, true)
		key := c.Key("node-0")
		c.Learn(mustPlace(t, h, claimPod(h.Snapshot(), "a"), "node-0"), "kind", key, "node-0")
		c.Key("node-1")
		defer func() {
			if r := recover(); r != nil {
				stopped = fmt.Sprint(r)
			}
		}()
		return "", c.Place(claimPod(h.Snapshot(), "b"), "kind", key, "node-1")
	}
	t.Setenv(VerifyShortcutsEnv, "") // as a binary runs
	if stopped, placed := copyOntoTainted(); placed == nil || stopped != "" {
		t.Fatalf("without %s: placed %v, stopped %q; want the copy made unchecked", VerifyShortcutsEnv, placed, stopped)
	}
	t.Setenv(VerifyShortcutsEnv, "1")
	stopped, placed := copyOntoTainted()
	if !VerifyShortcutsBuilt {
		// A production build: the variable changes nothing.
		if placed == nil || stopped != "" {
			t.Errorf("built without draxrverify, with %s: placed %v, stopped %q; want the copy made unchecked", VerifyShortcutsEnv, placed, stopped)
		}
		return
	}
	if !strings.Contains(stopped, "the state copy shortcut differs from the scheduler's full path") || !strings.Contains(stopped, "default/b") {
		t.Errorf("with %s: stopped %q, want the state copy difference for default/b", VerifyShortcutsEnv, stopped)
	}
}

// sameDevice compares attributes and capacities field by field: a field
// the API adds must be compared too.
func TestSameSliceKnowsEveryField(t *testing.T) {
	if n := reflect.TypeFor[resourceapi.DeviceAttribute]().NumField(); n != 8 {
		t.Errorf("DeviceAttribute has %d fields, sameDevice knows 8", n)
	}
	if n := reflect.TypeFor[resourceapi.DeviceCapacity]().NumField(); n != 2 {
		t.Errorf("DeviceCapacity has %d fields, sameDevice knows 2", n)
	}
	a, b := fx.GPUSlice("node-0", 2), fx.GPUSlice("node-1", 2)
	if !sameSlice(a.Spec, b.Spec) {
		t.Fatal("slices of two nodes alike but for their names differ")
	}
	for name, change := range map[string]func(s *resourceapi.ResourceSlice){
		"attribute": func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[1].Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To("other")}
		},
		"list value": func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[1].Attributes["ids"] = resourceapi.DeviceAttribute{IntValues: []int64{1}}
		},
		"capacity": func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: fx.Count(1)}}
		},
		"device name": func(s *resourceapi.ResourceSlice) { s.Spec.Devices[0].Name = "other" },
		"taint": func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		},
		"driver": func(s *resourceapi.ResourceSlice) { s.Spec.Driver = "other.example.com" },
	} {
		c := b.DeepCopy()
		change(c)
		if sameSlice(a.Spec, c.Spec) {
			t.Errorf("slices differing in %s compare the same", name)
		}
	}
}
