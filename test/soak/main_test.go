package soak

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The soak needs binaries built from this checkout; TestMain builds them
// once, only when a soak is asked for.
var (
	root   string // repository root
	bins   string // draxr binaries built for the soak
	cpBins string // etcd, kube-apiserver, kube-controller-manager
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(durationEnv) == "" || len(os.Args) > 0 && hasShort(os.Args[1:]) {
		return m.Run()
	}
	var err error
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: go list -m:", err)
		return 1
	}
	root = strings.TrimSpace(string(out))
	if out, err := exec.Command("make", "-s", "-C", root, "controlplane").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: make controlplane: %v\n%s", err, out)
		return 1
	}
	dir, err := exec.Command("make", "-s", "-C", root, "print-controlplane-dir").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: print-controlplane-dir:", err)
		return 1
	}
	cpBins = filepath.Join(root, strings.TrimSpace(string(dir)))
	// Under bin/, not .cache/: .cache may be shared between checkouts.
	bins = filepath.Join(root, "bin", "soak")
	build := exec.Command("go", "build", "-o", bins+"/", "./scheduler/cmd/draxr-scheduler", "./autoscaler/cmd/draxr-autoscaler")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

func hasShort(args []string) bool {
	for _, a := range args {
		if a == "-test.short" || a == "-test.short=true" {
			return true
		}
	}
	return false
}
