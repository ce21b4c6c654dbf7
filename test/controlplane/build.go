package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot is the module's folder (go list -m), where make runs.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Build runs `make controlplane` in root (a no-op when the binaries for
// the go.mod versions exist) and returns their folder, for Options.BinDir.
func Build(root string) (string, error) {
	if out, err := exec.Command("make", "-s", "-C", root, "controlplane").CombinedOutput(); err != nil {
		return "", fmt.Errorf("make controlplane: %v\n%s", err, out)
	}
	want, err := exec.Command("make", "-s", "-C", root, "print-controlplane-dir").Output()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, strings.TrimSpace(string(want)))
	if _, err := os.Stat(filepath.Join(dir, ".built")); err != nil {
		return "", fmt.Errorf("no built control plane in %s", dir)
	}
	return dir, nil
}
