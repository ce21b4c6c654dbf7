package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// make chart's command: values files merge in order (later wins), the
// manifests land in -o, and the chart's checks fail the command.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	a, b, out := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "out.yaml")
	if err := os.WriteFile(a, []byte("scheduler:\n  enabled: true\n  schedulerName: one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("scheduler:\n  schedulerName: two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run("../../../../charts/draxr", a+","+b, "r", "ns", out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Source: draxr/templates/scheduler.yaml", "schedulerName: two", "name: r-draxr-scheduler\n  namespace: ns"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if err := os.WriteFile(b, []byte("scheduler:\n  schedulerName: default-scheduler\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run("../../../../charts/draxr", a+","+b, "r", "ns", out); err == nil || !strings.Contains(err.Error(), "replaceKubeScheduler") {
		t.Errorf("err = %v, want the chart's refusal of a second default-scheduler", err)
	}
}
