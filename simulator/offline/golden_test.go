package offline_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/offline/scenario"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaleup"
)

var update = flag.Bool("update", false, "rewrite the scenarios' golden.json files")

// scenariosDir holds one folder per scenario: input/ (the YAML files
// `draxr simulate -f` reads), an optional options.yaml, golden.json (what
// `draxr simulate -o json` prints) and README.md (what it checks and why).
const scenariosDir = "testdata/scenarios"

// expectation is a scenario's key outcome, reasoned by hand (see its
// README.md). It is asserted on the plan itself, so a wrong golden file
// cannot pass, and it is asserted with -update too, so a wrong plan cannot
// be blessed.
type expectation struct {
	scaleUps map[string]int // node group -> new nodes; groups not listed must not grow
	helped   map[string]int // node group -> pods its new nodes take (optional)
	existing int            // pods placed on existing nodes
	// noScaleUp is the number of pods nothing can take; reasonPod's reason
	// must contain every reasonHas substring.
	noScaleUp   int
	reasonPod   string
	reasonHas   []string
	classErrors int
	// check asserts what is particular to the scenario (devices, names).
	check func(t *testing.T, out report.SimulateOutput)
}

var expectations = map[string]expectation{
	"explicit-extended-resource-name": {
		scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 12},
		check: devicesPerPod(1),
	},
	"implicit-extended-resource-name": {
		scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 5},
		noScaleUp: 1, reasonPod: "ml/wants-explicit-name",
		reasonHas: []string{"needs 1 example.com/gpu; a gpu node offers none"},
		check:     devicesPerPod(2),
	},
	"existing-nodes-partly-allocated": {
		scaleUps: map[string]int{"gpu": 1}, helped: map[string]int{"gpu": 3},
		existing: 3,
		check: func(t *testing.T, out report.SimulateOutput) {
			// Only the devices the running pods' claims do not hold.
			var got []string
			for _, pl := range out.ExistingNodes {
				got = append(got, pl.Devices...)
			}
			slices.Sort(got)
			want := []string{"gpu.example.com/gpu-0/gpu-5", "gpu.example.com/gpu-0/gpu-6", "gpu.example.com/gpu-0/gpu-7"}
			if !slices.Equal(got, want) {
				t.Errorf("devices used on gpu-0 = %v, want the free %v", got, want)
			}
			wantNewNodes(t, out, "gpu-new-1") // named after the group's one live node
		},
	},
	"pod-larger-than-template": {
		scaleUps: map[string]int{"gpu-dra": 1}, helped: map[string]int{"gpu-dra": 1},
		noScaleUp: 1, reasonPod: "ml/giant",
		reasonHas: []string{"needs 9 example.com/gpu; a gpu-dra node offers 8", "a cpu node offers none"},
	},
	"max-size-cap": {
		scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 16},
		noScaleUp: 4, reasonPod: "*", reasonHas: []string{"node group gpu is at max size 3"},
	},
	"max-nodes-total-cap": {
		scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 16},
		noScaleUp: 4, reasonPod: "*",
		reasonHas: []string{"node group gpu: --max-nodes-total 3 reached", "node group cpu: needs 1 example.com/gpu; a cpu node offers none"},
	},
	"two-dra-resources-one-pod": {
		scaleUps: map[string]int{"gpu-nic": 3}, helped: map[string]int{"gpu-nic": 6},
		check: func(t *testing.T, out report.SimulateOutput) {
			for _, pl := range out.ScaleUps[0].Placements {
				if len(pl.Devices) != 2 || !strings.HasPrefix(pl.Devices[0], "gpu.example.com/"+pl.Node+"/gpu-") ||
					!strings.HasPrefix(pl.Devices[1], "nic.example.com/"+pl.Node+"/nic-") {
					t.Errorf("%s got devices %v, want one GPU and one NIC of its node %s", pl.Pod, pl.Devices, pl.Node)
				}
			}
		},
	},
	"init-container-reuse": {
		scaleUps: map[string]int{"gpu": 1}, helped: map[string]int{"gpu": 8},
		check: devicesPerPod(1),
	},
	"device-plugin-and-dra-same-name": {
		scaleUps: map[string]int{"gpu-dp": 3, "gpu-dra": 1}, helped: map[string]int{"gpu-dp": 12, "gpu-dra": 2},
		check: func(t *testing.T, out report.SimulateOutput) {
			if out.ScaleUps[0].NodeGroup != "gpu-dp" {
				t.Errorf("most-pods chose %s first, want gpu-dp (12 pods on 3 nodes beat 8 on 1)", out.ScaleUps[0].NodeGroup)
			}
			for _, su := range out.ScaleUps {
				for _, pl := range su.Placements {
					if dra := len(pl.Devices) > 0; dra != (su.NodeGroup == "gpu-dra") {
						t.Errorf("%s on %s has DRA devices %v: want devices exactly on gpu-dra nodes", pl.Pod, pl.Node, pl.Devices)
					}
				}
			}
		},
	},
	"cpu-pods-beside-gpu-pods": {
		scaleUps: map[string]int{"gpu": 1, "cpu": 1}, helped: map[string]int{"gpu": 8, "cpu": 16},
		check: func(t *testing.T, out report.SimulateOutput) {
			for _, su := range out.ScaleUps {
				for _, pod := range su.Pods {
					if web := strings.HasPrefix(pod.String(), "shop/web-"); web != (su.NodeGroup == "cpu") {
						t.Errorf("%s went to node group %s: want web pods on cpu, trainers on gpu", pod, su.NodeGroup)
					}
				}
			}
		},
	},
	"kubectl-list-dump": {
		scaleUps: map[string]int{"gpu-dra": 1}, helped: map[string]int{"gpu-dra": 2},
		existing: 1,
		check: func(t *testing.T, out report.SimulateOutput) {
			// finetune holds gpu-0 and gpu-1; the Succeeded data-prep pod
			// holds nothing.
			if got := out.ExistingNodes[0].Devices; len(got) != 4 || slices.ContainsFunc(got, func(d string) bool {
				return strings.HasSuffix(d, "/gpu-0") || strings.HasSuffix(d, "/gpu-1")
			}) {
				t.Errorf("pod on gpu-dra-0 got %v, want 4 of the free gpu-2..gpu-7", got)
			}
			for _, g := range out.Groups {
				if g.Name == "gpu-dra" && g.CurrentNodes != 1 {
					t.Errorf("gpu-dra current nodes = %d, want 1 (gpu-dra-0 by its label)", g.CurrentNodes)
				}
			}
		},
	},
	"claim-template-plus-extended-resource": {
		scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 4},
		check: devicesPerPod(4),
	},
	"broken-cel-device-class": {
		scaleUps: map[string]int{"gpu": 1}, helped: map[string]int{"gpu": 4},
		noScaleUp: 1, reasonPod: "hw/fpga-job",
		reasonHas:   []string{"cannot be placed", "class fpga.example.com", "CEL compile error"},
		classErrors: 1,
	},
	"claim-limit-33-devices": {
		scaleUps: map[string]int{"gpu-40x": 1}, helped: map[string]int{"gpu-40x": 1},
		noScaleUp: 1, reasonPod: "ml/too-many-devices",
		reasonHas: []string{"cannot be placed", "exceeds the claim limit of 32"},
		check:     devicesPerPod(32),
	},
	"priority-expander": {
		scaleUps: map[string]int{"gpu-h100": 1, "gpu-a100": 1}, helped: map[string]int{"gpu-h100": 8, "gpu-a100": 2},
		check: func(t *testing.T, out report.SimulateOutput) {
			if out.ScaleUps[0].NodeGroup != "gpu-h100" {
				t.Errorf("first scale-up is %s, want gpu-h100 (priority 10)", out.ScaleUps[0].NodeGroup)
			}
		},
	},
	"price-expander": {
		scaleUps: map[string]int{"small": 4}, helped: map[string]int{"small": 16},
	},
	"workload-expansion": {
		scaleUps: map[string]int{"gpu": 3}, helped: map[string]int{"gpu": 9},
		check: func(t *testing.T, out report.SimulateOutput) {
			counts := map[string]int{}
			for _, pod := range out.ScaleUps[0].Pods {
				name := pod.Name
				counts[regexp.MustCompile(`-[a-z0-9]+$`).ReplaceAllString(name, "")]++
			}
			want := map[string]int{"db": 2, "serve": 3, "batch": 2, "api": 2}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				t.Errorf("pods per workload = %v, want %v (the suspended Job runs none)", counts, want)
			}
			for _, name := range []string{"ml/db-0", "ml/db-1"} {
				if !slices.ContainsFunc(out.ScaleUps[0].Pods, func(p scaleup.PodRef) bool { return p.String() == name }) {
					t.Errorf("StatefulSet pod %s missing from %v", name, out.ScaleUps[0].Pods)
				}
			}
		},
	},
	"device-taint-rule": {
		scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 5},
		existing: 3,
		check: func(t *testing.T, out report.SimulateOutput) {
			// No pod on gpu-0 (all tainted) nor on any gpu-3 device.
			placements := slices.Clone(out.ExistingNodes)
			for _, su := range out.ScaleUps {
				placements = append(placements, su.Placements...)
			}
			for _, pl := range placements {
				for _, d := range pl.Devices {
					if strings.Contains(d, "/gpu-0/") || strings.HasSuffix(d, "/gpu-3") {
						t.Errorf("pod %s got tainted device %s", pl.Pod, d)
					}
				}
			}
		},
	},
	"daemonset-claim-template": {scaleUps: map[string]int{"gpu": 3}, helped: map[string]int{"gpu": 7}},
	"daemonset-admin-access":   {scaleUps: map[string]int{"gpu": 2}, helped: map[string]int{"gpu": 8}},
	"cpu-pods-do-not-open-gpu-nodes": {
		scaleUps: map[string]int{"gpu": 1, "cpu": 2}, helped: map[string]int{"gpu": 8, "cpu": 16},
	},
}

func TestScenarios(t *testing.T) {
	// Every shortcut of the placement engine takes the full path too and
	// stops the test on any difference (docs/shortcuts.md).
	t.Setenv(placement.VerifyShortcutsEnv, "1")
	dirs, err := os.ReadDir(scenariosDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		name := d.Name()
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := expectations[name]
			if !ok {
				t.Fatalf("no expectation for scenario %s: add one to the expectations table", name)
			}
			runScenario(t, filepath.Join(scenariosDir, name), want)
		})
	}
	for name := range expectations {
		if !seen[name] {
			t.Errorf("expectation for %s, but no folder %s/%s", name, scenariosDir, name)
		}
	}
	if n := len(seen); n < 12 {
		t.Errorf("%d scenarios, want at least 12", n)
	}
}

func runScenario(t *testing.T, dir string, want expectation) {
	objs, err := input.LoadPaths([]string{filepath.Join(dir, "input")})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	opts, err := scenario.Options(filepath.Join(dir, "options.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := offline.Simulate(context.Background(), objs, opts)
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	out := report.NewSimulateOutput(res.Plan, res.ClassErrors)

	assertExpectation(t, out, want)

	var got bytes.Buffer
	if err := report.Write(&got, "json", out, nil); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(dir, "golden.json")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	wantJSON, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestScenarios -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), wantJSON) {
		t.Errorf("plan differs from %s (check the change, then go test -run TestScenarios -update):\n%s",
			golden, firstDiff(string(wantJSON), got.String()))
	}
}

func assertExpectation(t *testing.T, out report.SimulateOutput, want expectation) {
	t.Helper()
	gotNodes, gotHelped := map[string]int{}, map[string]int{}
	for _, su := range out.ScaleUps {
		gotNodes[su.NodeGroup] += su.NewNodes
		gotHelped[su.NodeGroup] += len(su.Pods)
	}
	if fmt.Sprint(gotNodes) != fmt.Sprint(want.scaleUps) {
		t.Errorf("scale-ups = %v, want %v", gotNodes, want.scaleUps)
	}
	if want.helped != nil && fmt.Sprint(gotHelped) != fmt.Sprint(want.helped) {
		t.Errorf("pods helped per group = %v, want %v", gotHelped, want.helped)
	}
	for _, g := range out.Groups {
		if g.NewNodes != want.scaleUps[g.Name] {
			t.Errorf("node group %s: newNodes = %d, want %d", g.Name, g.NewNodes, want.scaleUps[g.Name])
		}
	}
	if len(out.ExistingNodes) != want.existing {
		t.Errorf("%d pods on existing nodes, want %d: %+v", len(out.ExistingNodes), want.existing, out.ExistingNodes)
	}
	if len(out.NoScaleUp) != want.noScaleUp {
		t.Errorf("%d pods without scale-up, want %d: %+v", len(out.NoScaleUp), want.noScaleUp, out.NoScaleUp)
	}
	if want.reasonPod != "" {
		found := false
		for _, n := range out.NoScaleUp {
			if want.reasonPod != "*" && n.Pod.String() != want.reasonPod {
				continue
			}
			found = true
			for _, s := range want.reasonHas {
				if !strings.Contains(n.Reason, s) {
					t.Errorf("reason for %s = %q, want it to contain %q", n.Pod, n.Reason, s)
				}
			}
		}
		if !found {
			t.Errorf("no reason for pod %s in %+v", want.reasonPod, out.NoScaleUp)
		}
	}
	if len(out.ClassErrors) != want.classErrors {
		t.Errorf("%d DeviceClass errors, want %d: %v", len(out.ClassErrors), want.classErrors, out.ClassErrors)
	}
	if want.check != nil && !t.Failed() {
		want.check(t, out)
	}
}

// devicesPerPod checks that every pod placed on a new node got n distinct
// devices of that node.
func devicesPerPod(n int) func(*testing.T, report.SimulateOutput) {
	return func(t *testing.T, out report.SimulateOutput) {
		used := map[string]string{}
		for _, su := range out.ScaleUps {
			for _, pl := range su.Placements {
				if len(pl.Devices) != n {
					t.Errorf("%s got %d devices %v, want %d", pl.Pod, len(pl.Devices), pl.Devices, n)
				}
				for _, d := range pl.Devices {
					if !strings.Contains(d, "/"+pl.Node+"/") {
						t.Errorf("%s on %s got device %s of another node", pl.Pod, pl.Node, d)
					}
					if other, dup := used[d]; dup {
						t.Errorf("device %s given to both %s and %s", d, other, pl.Pod)
					}
					used[d] = pl.Pod.String()
				}
			}
		}
	}
}

func wantNewNodes(t *testing.T, out report.SimulateOutput, names ...string) {
	t.Helper()
	var got []string
	for _, su := range out.ScaleUps {
		for _, pl := range su.Placements {
			if !slices.Contains(got, pl.Node) {
				got = append(got, pl.Node)
			}
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("new nodes = %v, want %v", got, names)
	}
}

// firstDiff shows the first differing line of two texts, with context.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  golden: %s\n  got:    %s", i+1, w, g)
		}
	}
	return "(no line differs)"
}
