package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// sleeper starts a process in a group of its own, as the recorded
// processes are, and reaps it when it ends.
func sleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd.Process.Pid
}

// down stops the test nodes an autoscaler started (recorded in its node
// folder, not in the pids file) as well as the recorded processes, and
// removes both folders.
func TestDownStopsTheAutoscalersNodes(t *testing.T) {
	dir, nodeDir := t.TempDir(), t.TempDir()
	autoscaler, node, other := sleeper(t), sleeper(t), sleeper(t)
	if err := appendRecords(dir, []record{{name: "kueue", pid: other}, {name: "draxr-autoscaler", pid: autoscaler}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "draxr-autoscaler.nodes"), []byte(nodeDir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nodeDir, "gpu-0.pid"), []byte(strconv.Itoa(node)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := down(dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range []int{autoscaler, node, other} {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs after down", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, d := range []string{dir, nodeDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", d, err)
		}
	}
}

func TestKueueMappingsRejected(t *testing.T) {
	for _, m := range []string{"example.com/gpu", "=gpu.example.com", "example.com/gpu="} {
		if err := startKueue(t.TempDir(), ".", []string{m}); err == nil {
			t.Errorf("mapping %q accepted", m)
		}
	}
}
