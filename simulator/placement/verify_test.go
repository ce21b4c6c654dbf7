package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// A copy whose precondition does not hold (the destination is tainted, so
// not identical to the source) goes through unnoticed without the
// switch; with it, the full path rejects the pod and the process stops.
func TestVerifyShortcutsCatchesACopyTheSchedulerRejects(t *testing.T) {
	replicateOntoTainted := func() (stopped string, err error) {
		snap := snapshot.New()
		snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
		for i := range 2 {
			node := fx.Node(fmt.Sprintf("node-%d", i), 64, 256, nil)
			if i == 1 {
				node.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
			}
			if err := snap.AddNode(node); err != nil {
				t.Fatal(err)
			}
			if err := snap.AddResourceSlice(fx.GPUSlice(node.Name, 8)); err != nil {
				t.Fatal(err)
			}
		}
		h, err := New(context.Background(), snap, nil)
		if err != nil {
			t.Fatal(err)
		}
		var src, run []*v1.Pod
		for i := range 2 {
			src = append(src, mustPlace(t, h, fx.Pod(fmt.Sprintf("s%d", i), 100, fx.GPUs(fx.GPUResource, 1)), "node-0"))
			run = append(run, fx.Pod(fmt.Sprintf("r%d", i), 100, fx.GPUs(fx.GPUResource, 1)))
		}
		defer func() {
			if r := recover(); r != nil {
				stopped = fmt.Sprint(r)
			}
		}()
		return "", h.Replicate("node-0", src, "node-1", run)
	}

	t.Setenv(VerifyShortcutsEnv, "") // as a binary runs
	if stopped, err := replicateOntoTainted(); err != nil || stopped != "" {
		t.Fatalf("without %s: err %v, stopped %q; want the copy made unchecked", VerifyShortcutsEnv, err, stopped)
	}
	t.Setenv(VerifyShortcutsEnv, "1")
	stopped, err := replicateOntoTainted()
	if !VerifyShortcutsBuilt {
		// A production build: the variable changes nothing.
		if err != nil || stopped != "" {
			t.Errorf("built without draxrverify, with %s: err %v, stopped %q; want the copy made unchecked", VerifyShortcutsEnv, err, stopped)
		}
		return
	}
	if !strings.Contains(stopped, "the Replicate shortcut differs from the scheduler's full path") || !strings.Contains(stopped, "default/r0") {
		t.Errorf("with %s: stopped %q, want the Replicate difference for default/r0", VerifyShortcutsEnv, stopped)
	}
}

// A build without -tags draxrverify, as every shipped binary is, never
// honours the variable: an engine made with it set verifies nothing.
func TestProductionBuildIgnoresVerifyShortcutsEnv(t *testing.T) {
	t.Setenv(VerifyShortcutsEnv, "1")
	h, err := New(context.Background(), snapshot.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.VerifiesShortcuts(); got != VerifyShortcutsBuilt {
		t.Errorf("with %s set, VerifiesShortcuts() = %v in a build where draxrverify is %v", VerifyShortcutsEnv, got, VerifyShortcutsBuilt)
	}
}
