package main

import (
	"encoding/json"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"draxr.dev/draxr/simulator/report"
)

// --feature-gates changes what the scheduler's plugins do, so the plan
// changes with it, and the output says which gates were set.
func TestFeatureGates(t *testing.T) {
	// Restores the process default when the test ends.
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAExtendedResource, true)

	code, out, errOut := draxr(t, "simulate", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var on report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &on); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = draxr(t, "simulate", "-o", "json", "--feature-gates=DRAExtendedResource=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var off report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &off); err != nil {
		t.Fatal(err)
	}
	if v, ok := off.FeatureGates["DRAExtendedResource"]; !ok || v || len(off.FeatureGates) != 1 || on.FeatureGates != nil {
		t.Errorf("featureGates on %v, off %v; want only the second to list DRAExtendedResource=false", on.FeatureGates, off.FeatureGates)
	}
	helped := func(o report.SimulateOutput, group string) int {
		for _, su := range o.ScaleUps {
			if su.NodeGroup == group {
				return len(su.Pods)
			}
		}
		return 0
	}
	// Without DRAExtendedResource nothing maps example.com/gpu to DRA
	// devices: the DRA group helps no pod asking for it.
	if helped(on, "gpu-dra") == 0 || helped(off, "gpu-dra") != 0 {
		t.Errorf("pods helped by gpu-dra: %d with the gate, %d without; want some, then none", helped(on, "gpu-dra"), helped(off, "gpu-dra"))
	}

	code, out, _ = draxr(t, "simulate", "--feature-gates=DRAExtendedResource=false")
	if code != 0 || !strings.Contains(out, "feature gates: DRAExtendedResource=false") {
		t.Errorf("exit %d, table does not name the gate:\n%s", code, out)
	}
	code, _, errOut = draxr(t, "simulate", "--feature-gates=NoSuchGate=true")
	if code != 2 || !strings.Contains(errOut, "--feature-gates") || !strings.Contains(errOut, "NoSuchGate") {
		t.Errorf("unknown gate: exit %d, stderr %q; want 2 naming the gate", code, errOut)
	}
}
