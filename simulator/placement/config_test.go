package placement

import (
	"context"
	"strings"
	"testing"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/snapshot"
)

// The planner reads draxr-scheduler's own configuration, whose profile
// runs the upstream plugins under draxr's names.
func TestShippedSchedulerConfig(t *testing.T) {
	profile, err := LoadProfile("../../scheduler/deploy/scheduler-config.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot.New()
	snap.SetDeviceClass(fx.Class("gpu.example.com", fx.Driver, fx.GPUResource, fx.Epoch))
	for _, n := range []string{"a", "b"} {
		if err := snap.AddNode(fx.Node(n, 64, 256, nil)); err != nil {
			t.Fatal(err)
		}
		if err := snap.AddResourceSlice(fx.GPUSlice(n, 2)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(context.Background(), snap, profile)
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for i := 0; i < 4; i++ {
		node, _, ferr := h.PlaceBest(fx.Pod("p"+string(rune('0'+i)), 100, fx.GPUs(fx.GPUResource, 1)), []string{"a", "b"})
		if ferr != nil {
			t.Fatalf("pod %d: %v", i, ferr)
		}
		perNode[node]++
	}
	if perNode["a"] != 2 || perNode["b"] != 2 {
		t.Errorf("placements = %v, want 2 per node", perNode)
	}
	_, _, ferr := h.PlaceBest(fx.Pod("extra", 100, fx.GPUs(fx.GPUResource, 1)), []string{"a", "b"})
	if ferr == nil || !strings.Contains(ferr.Error(), "DynamicResources") {
		t.Errorf("fifth pod: %v, want a DynamicResources rejection", ferr)
	}
}

func TestLoadProfileErrors(t *testing.T) {
	for name, tc := range map[string]struct{ data, want string }{
		"not yaml":       {"{", "scheduler config cfg.yaml"},
		"wrong kind":     {"apiVersion: v1\nkind: Pod\n", "scheduler config cfg.yaml"},
		"unknown plugin": {"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			profile, err := ParseProfile([]byte(tc.data), "cfg.yaml", "")
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := New(context.Background(), snapshot.New(), profile); err == nil || !strings.Contains(err.Error(), "NoSuchPlugin") {
				t.Fatalf("New: %v, want an error naming NoSuchPlugin", err)
			}
		})
	}
}
