// Package layers checks the house rules of the repository's layout: which
// top-level folder may import which, and that no shipped binary links a
// test tool or a fake clientset. See README.md, "Architecture".
package layers

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "draxr.dev/draxr/"

// mayImport lists, for each top-level folder, the folders its non-test
// code may import. Arrows point down only:
//
//	test -> autoscaler -> cloudprovider -> simulator -> scheduler
//	test -> kubelet
var mayImport = map[string][]string{
	"scheduler":     nil,
	"simulator":     {"scheduler"},
	"cloudprovider": {"simulator", "scheduler"},
	"autoscaler":    {"cloudprovider", "simulator", "scheduler"},
	"kubelet":       nil,
	"test":          {"autoscaler", "cloudprovider", "simulator", "scheduler", "kubelet"},
}

// binaries are the commands users run; none may link a test tool.
var binaries = []string{
	"autoscaler/cmd/draxr",
	"autoscaler/cmd/draxr-autoscaler",
	"scheduler/cmd/draxr-scheduler",
	"kubelet/cmd/draxr-example-driver",
}

// testTools are the folders that hold test-only code.
var testTools = []string{"test/", "kubelet/testnode/", "kubelet/cmd/draxr-test-node"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	// No control plane needed, and a few seconds: this runs under -short
	// too, so make test-unit and test-race check the layers.
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func topFolder(importPath string) (string, bool) {
	rest, ok := strings.CutPrefix(importPath, module)
	if !ok {
		return "", false
	}
	top, _, _ := strings.Cut(rest, "/")
	return top, true
}

// violations lists every import from one top-level folder to another that
// mayImport does not allow, and every pair of folders importing each other.
func violations(pkgs []pkg, rules map[string][]string) []string {
	var out []string
	seen := map[[2]string]string{}
	for _, p := range pkgs {
		from, ok := topFolder(p.ImportPath)
		if !ok {
			continue
		}
		allowed, known := rules[from]
		if !known {
			out = append(out, fmt.Sprintf("%s: top-level folder %q has no layer; add it to mayImport", p.ImportPath, from))
			continue
		}
		for _, imp := range p.Imports {
			to, ok := topFolder(imp)
			if !ok || to == from {
				continue
			}
			seen[[2]string{from, to}] = p.ImportPath + " -> " + imp
			if !contains(allowed, to) {
				out = append(out, fmt.Sprintf("%s imports %s: %s may import only %v", p.ImportPath, imp, from, allowed))
			}
		}
	}
	for pair, example := range seen {
		if back, ok := seen[[2]string{pair[1], pair[0]}]; ok && pair[0] < pair[1] {
			out = append(out, fmt.Sprintf("%s and %s import each other (%s; %s)", pair[0], pair[1], example, back))
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestImportsPointDown(t *testing.T) {
	for _, v := range violations(goList(t, "./..."), mayImport) {
		t.Error(v)
	}
}

// The check itself must catch a back-import: simulator importing
// autoscaler, as it did before the layers were enforced.
func TestViolationsCatchBackImport(t *testing.T) {
	tests := []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{
			name: "downward imports pass",
			pkgs: []pkg{
				{ImportPath: module + "autoscaler/core", Imports: []string{module + "simulator/scaleup", "fmt"}},
				{ImportPath: module + "simulator/scaleup", Imports: []string{module + "scheduler/classes"}},
			},
		},
		{
			name: "back-import fails",
			pkgs: []pkg{
				{ImportPath: module + "autoscaler/core", Imports: []string{module + "simulator/scaleup"}},
				{ImportPath: module + "simulator/offline", Imports: []string{module + "autoscaler/metrics"}},
			},
			want: []string{
				"autoscaler and simulator import each other",
				"simulator/offline imports draxr.dev/draxr/autoscaler/metrics: simulator may import only [scheduler]",
			},
		},
		{
			name: "unknown folder fails",
			pkgs: []pkg{{ImportPath: module + "tools/x"}},
			want: []string{`top-level folder "tools" has no layer`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(tc.pkgs, mayImport)
			if len(got) != len(tc.want) {
				t.Fatalf("violations = %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("violation %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestBinariesLinkNoTestTools(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin, func(t *testing.T) {
			pkgs := goList(t, "-deps", "./"+bin)
			if len(pkgs) == 0 {
				t.Fatalf("go list -deps ./%s listed nothing", bin)
			}
			for _, p := range pkgs {
				rest, ok := strings.CutPrefix(p.ImportPath, module)
				if !ok {
					continue
				}
				for _, tool := range testTools {
					if strings.HasPrefix(rest+"/", tool) || rest == strings.TrimSuffix(tool, "/") {
						t.Errorf("%s links test tool %s", bin, p.ImportPath)
					}
				}
			}
		})
	}
}

// fakeClients lists every import of a fake clientset (a package named
// fake: k8s.io/client-go/kubernetes/fake, dynamic/fake, a generated
// clientset's, or a typed group's .../fake/...) by one of draxr's own
// packages among pkgs. Only draxr's direct imports are checked: upstream
// packages a binary links (the scheduler's queue) import kubernetes/fake
// themselves, which draxr cannot change.
func fakeClients(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module) {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasSuffix(imp, "/fake") || strings.Contains(imp, "/fake/") {
				out = append(out, p.ImportPath+" imports "+imp)
			}
		}
	}
	sort.Strings(out)
	return out
}

// A shipped binary reads the API server, or a dump through listers: a
// fake clientset in it is an in-memory API server standing in for one
// (issue 45, one view of the cluster), and tens of MB of binary.
func TestBinariesLinkNoFakeClientset(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin, func(t *testing.T) {
			pkgs := goList(t, "-deps", "./"+bin)
			if len(pkgs) == 0 {
				t.Fatalf("go list -deps ./%s listed nothing", bin)
			}
			for _, v := range fakeClients(pkgs) {
				t.Errorf("%s links a fake clientset: %s", bin, v)
			}
		})
	}
}

// The check itself must catch the fake clientsets draxr simulate once
// linked, and leave upstream's own imports alone.
func TestFakeClientsCaught(t *testing.T) {
	got := fakeClients([]pkg{
		{ImportPath: module + "autoscaler/cmd/draxr", Imports: []string{"k8s.io/client-go/kubernetes/fake", "k8s.io/client-go/tools/record"}},
		{ImportPath: module + "cloudprovider/clusterapi", Imports: []string{"k8s.io/client-go/dynamic/fake", "k8s.io/client-go/dynamic"}},
		{ImportPath: module + "autoscaler/app", Imports: []string{"k8s.io/client-go/kubernetes/typed/core/v1/fake"}},
		{ImportPath: "k8s.io/kubernetes/pkg/scheduler/backend/queue", Imports: []string{"k8s.io/client-go/kubernetes/fake"}},
	})
	want := []string{
		module + "autoscaler/app imports k8s.io/client-go/kubernetes/typed/core/v1/fake",
		module + "autoscaler/cmd/draxr imports k8s.io/client-go/kubernetes/fake",
		module + "cloudprovider/clusterapi imports k8s.io/client-go/dynamic/fake",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fakeClients = %q, want %q", got, want)
	}
}

// clientPackages are the client-go packages that talk to an API server,
// and the suffix of a generated clientset: simulator/ holds listers and
// pure code, and the View is read from a live cluster above it
// (autoscaler/liveview, issue 54).
var clientPackages = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/dynamic",
	"k8s.io/client-go/rest",
	"k8s.io/client-go/discovery",
}

// apiClients lists every import of an API client (clientPackages, a
// package under one, or a generated clientset) by a non-test package of
// draxr's under folder among pkgs. Only direct imports are checked: the
// listers simulator/ reads through come with client-go's own imports.
func apiClients(pkgs []pkg, folder string) []string {
	var out []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+folder+"/") && p.ImportPath != module+folder {
			continue
		}
		for _, imp := range p.Imports {
			client := strings.Contains(imp, "/clientset/versioned")
			for _, c := range clientPackages {
				client = client || imp == c || strings.HasPrefix(imp, c+"/")
			}
			if client {
				out = append(out, p.ImportPath+" imports "+imp)
			}
		}
	}
	sort.Strings(out)
	return out
}

// simulator/ plans from listers, whether a dump or informers fill them:
// whatever takes a clientset, dynamic client, discovery client or REST
// config lives above it (autoscaler/liveview), so the engine cannot
// reach the API server.
func TestSimulatorHasNoAPIClient(t *testing.T) {
	pkgs := goList(t, "./simulator/...")
	if len(pkgs) < 10 {
		t.Fatalf("go list ./simulator/... listed %d packages", len(pkgs))
	}
	for _, v := range apiClients(pkgs, "simulator") {
		t.Errorf("%s: build the View from a live cluster in autoscaler/liveview", v)
	}
}

// The check itself must catch the clients simulator/view once built
// informers from, and leave listers and other folders alone.
func TestAPIClientsCaught(t *testing.T) {
	got := apiClients([]pkg{
		{ImportPath: module + "simulator/view", Imports: []string{
			"k8s.io/client-go/kubernetes", "k8s.io/client-go/dynamic/dynamicinformer", "k8s.io/client-go/rest",
			"k8s.io/client-go/discovery", "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned",
			"k8s.io/client-go/listers/core/v1", "k8s.io/client-go/tools/cache", "k8s.io/client-go/restmapper"}},
		{ImportPath: module + "autoscaler/liveview", Imports: []string{"k8s.io/client-go/kubernetes"}},
		{ImportPath: module + "simulatorx", Imports: []string{"k8s.io/client-go/rest"}},
	}, "simulator")
	want := []string{
		module + "simulator/view imports k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned",
		module + "simulator/view imports k8s.io/client-go/discovery",
		module + "simulator/view imports k8s.io/client-go/dynamic/dynamicinformer",
		module + "simulator/view imports k8s.io/client-go/kubernetes",
		module + "simulator/view imports k8s.io/client-go/rest",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("apiClients = %q, want %q", got, want)
	}
}
