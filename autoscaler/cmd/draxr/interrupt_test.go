package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runMainEnv makes the test binary run draxr's main instead of the tests,
// so that a test can run draxr as a process (signals, exit codes) without
// linking another binary.
const runMainEnv = "DRAXR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// draxrProcess is draxr as its own process, run by the test binary.
func draxrProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// longPlan writes an input whose plan takes many seconds and loads in a
// fraction of one: pods that are all different (no two share an estimate)
// and dozens of node groups, each estimated for all of them. Its Service
// is skipped, and the line that says so marks the end of reading.
func longPlan(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\n---\n")
	for g := range 40 {
		fmt.Fprintf(&b, `apiVersion: draxr.dev/v1alpha1
kind: NodeGroup
metadata: {name: g%02d}
spec:
  minSize: 0
  maxSize: 100000
  template: {status: {capacity: {cpu: "%d", memory: 256Gi, pods: "1000"}}}
---
`, g, 64+g)
	}
	for i := range 5000 {
		fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: job-%05d, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: "%dKi"}}}]
---
`, i, 65536+i)
	}
	return writeFile(t, "long.yaml", b.String())
}

// notifyingBuffer is a Buffer that closes seen once it holds mark.
type notifyingBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	mark string
	seen chan struct{}
}

func (b *notifyingBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.seen != nil && strings.Contains(b.buf.String(), b.mark) {
		close(b.seen)
		b.seen = nil
	}
	return n, err
}

func (b *notifyingBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Ctrl-C (or a SIGTERM from a supervisor) half a second into a long plan
// stops it within a second or two; draxr says so and exits non-zero, with
// no plan printed.
func TestSignalStopsSimulate(t *testing.T) {
	input := longPlan(t)
	for _, tt := range []struct {
		sig      syscall.Signal
		name     string
		wantCode int
	}{
		{syscall.SIGINT, "SIGINT", 130},
		{syscall.SIGTERM, "SIGTERM", 143},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := draxrProcess(t, "simulate", "-f", input)
			var stdout bytes.Buffer
			read := make(chan struct{})
			stderr := &notifyingBuffer{mark: "skipped 1 objects", seen: read}
			cmd.Stdout, cmd.Stderr = &stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-read:
			case err := <-done:
				t.Fatalf("ended before planning: %v; stderr: %s", err, stderr.String())
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Logf("killed: %v", <-done)
				t.Fatalf("input not read after a minute; stderr: %s", stderr.String())
			}
			time.Sleep(500 * time.Millisecond)
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Logf("killed: %v", <-done)
				t.Fatalf("still running 10 s after %s; stderr: %s", tt.name, stderr.String())
			}
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("exited %v after %s, want within 2 s", took.Round(time.Millisecond), tt.name)
			}
			code := cmd.ProcessState.ExitCode()
			if code != tt.wantCode {
				t.Errorf("exit code %d (%v), want %d; stderr: %s", code, err, tt.wantCode, stderr.String())
			}
			if want := "error: interrupted (" + tt.name + ")"; !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr = %q, want %q", stderr.String(), want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want no plan", stdout.String())
			}
		})
	}
}
