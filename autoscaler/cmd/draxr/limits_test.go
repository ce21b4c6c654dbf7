package main

import (
	"encoding/json"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaleup"
)

// draxr simulate takes CA's limit flags: with --gpu-total=example.com/gpu:0:12
// the built-in cluster (one DRA node of 8 GPUs) may add 4 GPUs: one
// device-plugin node of 4, no DRA node of 8; the GPU pods left out say
// which limit.
func TestSimulateGPUTotal(t *testing.T) {
	code, out, errOut := draxr(t, "simulate", "-o", "json", "--gpu-total=example.com/gpu:0:12")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, errOut)
	}
	var got report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plan.ScaleUps) != 1 || got.Plan.ScaleUps[0].NodeGroup != "gpu-dp" || got.Plan.ScaleUps[0].NewNodes != 1 {
		t.Fatalf("scale-ups = %+v, want gpu-dp +1 only", got.Plan.ScaleUps)
	}
	limited := 0
	for _, n := range got.Plan.NoScaleUp {
		if strings.Contains(n.Reason, "node group gpu-dra: max cluster example.com/gpu limit reached (--gpu-total=example.com/gpu:0:12 leaves 0, a node adds 8)") {
			limited++
		}
		if strings.HasPrefix(n.Pod.Name, "trainer-") && n.Code != scaleup.ResourceLimitReached && n.Code != scaleup.MultipleReasons {
			t.Errorf("%s: code %s", n.Pod, n.Code)
		}
	}
	if limited == 0 {
		t.Errorf("no pod names the GPU limit: %+v", got.Plan.NoScaleUp)
	}
}

func TestSimulateLimitFlagErrors(t *testing.T) {
	for args, want := range map[string]string{
		"--gpu-total=nvidia-tesla-k80:0:16":                    `GPU type "nvidia-tesla-k80" must be an extended resource name`,
		"--cores-total=64":                                     `--cores-total "64": want <min>:<max>`,
		"--balancing-label=pool --balancing-ignore-label=zone": "--balancing-label cannot be combined with --balancing-ignore-label",
		"--max-nodes-per-scaleup=0":                            "--max-nodes-per-scaleup must be >= 1",
	} {
		code, _, errOut := draxr(t, append([]string{"simulate"}, strings.Fields(args)...)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("simulate %s: exit %d, stderr %q; want 2 and %q", args, code, errOut, want)
		}
	}
}
