// Package cli checks what every draxr binary does on its command line as
// kubectl and the Kubernetes components do: --version names the
// Kubernetes release, a stray word is an error.
package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	basever "k8s.io/component-base/version"

	"draxr.dev/draxr/simulator/placement"
)

// commands lists the main packages under the folders binaries live in,
// so that a new binary is checked without being named here.
func commands(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`,
		"./autoscaler/cmd/...", "./scheduler/cmd/...", "./kubelet/cmd/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 5 {
		t.Fatalf("found %d commands (%v); is the list rooted at the repository?", len(pkgs), pkgs)
	}
	return pkgs
}

// run runs a binary and returns its exit code and output; it fails the
// test if the binary is still running after a while.
func run(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: still running after 30 s", filepath.Base(bin), args)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func TestEveryBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary")
	}
	pkgs := commands(t)
	dir := t.TempDir()
	build := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, pkg := range pkgs {
		name := filepath.Base(pkg)
		bin := filepath.Join(dir, name)
		t.Run(name, func(t *testing.T) {
			// "NAME[ RELEASE], built on Kubernetes ..." (the kubelet's
			// binaries know no draxr release).
			code, out, errOut := run(t, bin, "--version")
			head, _, _ := strings.Cut(out, ",")
			got, _, _ := strings.Cut(head, " ")
			want := "built on Kubernetes "
			if code != 0 || got != name || !strings.Contains(out, want) ||
				!strings.Contains(out, basever.DefaultKubeBinaryVersion) {
				t.Errorf("--version: exit %d, stdout %q, stderr %q; want exit 0, the name %s, %q and %s",
					code, out, errOut, name, want, basever.DefaultKubeBinaryVersion)
			}
			// A shipped binary is built without -tags draxrverify: it holds
			// no trace of the test switch, so it cannot read it and panic
			// on a shortcut's difference (docs/shortcuts.md).
			if data, err := os.ReadFile(bin); err != nil {
				t.Fatal(err)
			} else if bytes.Contains(data, []byte(placement.VerifyShortcutsEnv)) {
				t.Errorf("%s holds %s: a production build must not read it", name, placement.VerifyShortcutsEnv)
			}
			// A flag that lost its dashes must not be ignored.
			code, _, errOut = run(t, bin, "max-pods=20")
			if code == 0 || !strings.Contains(errOut, `"max-pods=20"`) {
				t.Errorf("stray argument: exit %d, stderr %q; want non-zero naming it", code, errOut)
			}
		})
	}
}
