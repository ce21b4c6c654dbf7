package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/soak/checker"
)

const (
	durationEnv = "DRAXR_SOAK_DURATION"
	seedEnv     = "DRAXR_SOAK_SEED"
	nodesEnv    = "DRAXR_SOAK_NODES" // the node backend: local (default) or kwok
)

func backendNamed(name string) (nodeBackend, error) {
	switch name {
	case "", "local":
		return localBackend{}, nil
	case "kwok":
		return kwokBackend{}, nil
	}
	return nil, fmt.Errorf("%s=%q: want local or kwok", nodesEnv, name)
}

// TestSoak is make soak: DRAXR_SOAK_DURATION of churn and faults with the
// checker judging throughout. It runs only when asked for.
func TestSoak(t *testing.T) {
	if testing.Short() || os.Getenv(durationEnv) == "" {
		t.Skip("make soak runs it (" + durationEnv + " unset)")
	}
	duration, err := time.ParseDuration(os.Getenv(durationEnv))
	if err != nil || duration < time.Minute {
		t.Fatalf("%s=%q: want a duration of at least 1m", durationEnv, os.Getenv(durationEnv))
	}
	seed := uint64(1)
	if v := os.Getenv(seedEnv); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", seedEnv, v)
		}
	}
	backend, err := backendNamed(os.Getenv(nodesEnv))
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, duration: duration, seed: seed, backend: backend, tm: soakTimings(), driven: map[string]int{}}
	s.run()
}

type soak struct {
	t        *testing.T
	duration time.Duration
	seed     uint64
	backend  nodeBackend
	tm       timings

	mu       sync.Mutex
	driven   map[string]int
	timeline []string
	begin    time.Time
	errs     []string
}

func (s *soak) record(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !strings.HasPrefix(what, "  ") {
		s.driven[what]++
	}
	if !strings.HasPrefix(what, "create ") && !strings.HasPrefix(what, "scale ") && !strings.HasPrefix(what, "delete ") && !strings.HasPrefix(what, "Job ") {
		s.timeline = append(s.timeline, fmt.Sprintf("%7s %s", time.Since(s.begin).Round(time.Second), what))
	}
}

func (s *soak) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.t.Log(msg)
	s.mu.Lock()
	s.errs = append(s.errs, msg)
	s.mu.Unlock()
}

func (s *soak) run() {
	t := s.t
	s.begin = time.Now()
	// The soak's own deadline, well before go test's (-timeout 0 in make
	// soak, since the duration varies).
	ctx, cancel := context.WithTimeout(context.Background(), s.duration+15*time.Minute)
	defer cancel()
	watchdog := time.AfterFunc(s.duration+20*time.Minute, func() { panic("soak: still running 20m after its duration") })
	defer watchdog.Stop()

	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: cpBins, AuditPolicy: policy, Controllers: s.backend.controllers()})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	if _, err := cp.StartScheduler(ctx, controlplane.SchedulerOptions{
		Binary: filepath.Join(bins, "draxr-scheduler"), Config: filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		RBAC: filepath.Join(root, "scheduler/deploy/rbac.yaml"), ServiceAccount: "kube-system/draxr-scheduler",
	}); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(s.seed, s.seed^0x5eed))
	w := &workload{client: cp.Client, rng: rng, record: s.record}
	if err := w.setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx,
		failCreatesPolicyObject("plug-flaky"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The checker owns its state; observations reach it through one channel.
	obsCh := make(chan checker.Observation, 1<<16)
	active := activeGroups(s.backend)
	chk := checker.New(checkerConfig(s.tm, active))
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		for o := range obsCh {
			for _, v := range chk.Observe(o) {
				s.t.Logf("VIOLATION %s", v)
				if v.Invariant == checker.PendingBounded {
					s.t.Log(describePending(cp.Client, v.Message))
				}
			}
		}
	}()
	obsCtx, stopObs := context.WithCancel(ctx)
	obs := &observer{out: obsCh}
	if err := obs.start(obsCtx, cp.Client); err != nil {
		t.Fatal(err)
	}
	go obs.tailAudit(obsCtx, cp.AuditLog)
	go func() {
		for obsCtx.Err() == nil {
			obs.send(checker.Observation{Kind: checker.Tick})
			time.Sleep(500 * time.Millisecond)
		}
	}()

	providerArgs, err := s.backend.configure(ctx, cp, dir, active, s.tm)
	if err != nil {
		t.Fatal(err)
	}
	prio, err := writePriorities(dir, active)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, "draxr-autoscaler", filepath.Join(root, "autoscaler/deploy/rbac.yaml"), "kube-system/draxr-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.backend.start(obsCtx, cp); err != nil {
		t.Fatal(err)
	}
	tm := s.tm
	args := append([]string{"--kubeconfig=" + kubeconfig,
		"--scheduler-config=" + filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		"--scan-interval=" + tm.scan.String(), "--max-node-provision-time=" + tm.provision.String(),
		// A new leader knows nothing of its predecessor's scale-ups: it
		// judges registered, never-Ready nodes by the startup time (15m
		// by default), during which they count as upcoming capacity.
		"--max-node-startup-time=" + tm.provision.String(),
		"--scale-down-unneeded-time=" + tm.unneeded.String(), "--scale-down-delay-after-add=0s",
		"--scale-down-delay-after-failure=5s", "--initial-node-group-backoff-duration=" + tm.backoff.String(),
		"--expander=priority", "--expander-priorities=" + prio,
		"--leader-elect=true", "--max-inactivity=1m", "--max-failing-time=2m", "--max-startup-time=2m", "--v=2",
	}, providerArgs...)
	reps := &replicas{cp: cp, args: args, obs: obs, logf: t.Logf}
	for _, name := range []string{"a", "b"} {
		if _, err := reps.start(name); err != nil {
			t.Fatal(err)
		}
	}
	repCtx, stopReps := context.WithCancel(ctx)
	go reps.supervise(repCtx)
	f := &faults{cp: cp, reps: reps, obs: obs, record: s.record, errorf: s.errorf}
	go f.watchLeader(repCtx)
	f.awaitRecovery(ctx, "start", "", time.Now())
	s.begin = time.Now()

	t.Logf("soak: %s, seed %d, nodes from the %s", s.duration, s.seed, s.backend.name())
	end := time.Now().Add(s.duration)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.driveFaults(ctx, f, rand.New(rand.NewPCG(s.seed+1, s.seed)), end)
	}()
	apiErrors := 0
	lastReap := time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		if err := w.step(ctx); err != nil {
			// Mostly the API server restarting under the soak.
			apiErrors++
		}
		if time.Since(lastReap) > 5*time.Second {
			w.reapJobs(ctx)
			lastReap = time.Now()
		}
		time.Sleep(time.Duration(800+rng.IntN(1400)) * time.Millisecond)
	}
	wg.Wait()
	// A last quiet stretch: pending pods get their chance to be judged.
	time.Sleep(tm.provision)

	stopReps()
	logs := reps.stopAll()
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			s.errorf("read %s: %v", path, err)
			continue
		}
		obs.send(checker.Observation{Kind: checker.AutoscalerLog, Name: filepath.Base(path), Text: string(data)})
	}
	stopObs()
	time.Sleep(300 * time.Millisecond)
	close(obsCh)
	<-checked

	// A soak that never put an invariant to the test proves nothing of it.
	for inv, n := range chk.Counts() {
		if n == 0 {
			s.errorf("invariant %s was never checked: the churn or the faults did not reach it", inv)
		}
	}
	s.report(chk, f, apiErrors)
	failed := len(chk.Violations()) > 0 || len(s.errs) > 0
	kept := keepLogs(t, cp.Dir, failed)
	t.Logf("component logs kept in %s", kept)
	if failed {
		t.Fatalf("logs in %s; soak failed: %d violations, %d harness errors", kept, len(chk.Violations()), len(s.errs))
	}
}

// driveFaults runs one fault at a time: every kind once in a seeded
// order, then seeded random picks, spaced so each has time to heal.
func (s *soak) driveFaults(ctx context.Context, f *faults, rng *rand.Rand, end time.Time) {
	kinds := faultKinds()
	order := rng.Perm(len(kinds))
	spacing := 40 * time.Second
	if s.duration < 5*time.Minute {
		spacing = (s.duration - 60*time.Second) / time.Duration(len(kinds))
	}
	next := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		// Leave the last stretch without a fault.
		if time.Until(end) < 15*time.Second {
			return
		}
		kind := kinds[rng.IntN(len(kinds))]
		if i < len(kinds) {
			kind = kinds[order[i]]
		}
		if err := f.run(ctx, kind); err != nil {
			s.errorf("fault %q: %v", kind, err)
		}
		// On the slots when faults heal quickly, 10s after the last one
		// when one took longer.
		next = next.Add(spacing)
		if n := time.Now().Add(10 * time.Second); n.After(next) {
			next = n
		}
	}
}

// keepLogs copies the components' logs to bin/soak/logs-<time>, as the
// control plane's folder goes with it; the audit log only of a failed run.
func keepLogs(t *testing.T, from string, audit bool) string {
	to := filepath.Join(root, "bin", "soak", "logs-"+time.Now().UTC().Format("20060102-150405"))
	if err := os.MkdirAll(to, 0o750); err != nil {
		t.Log(err)
		return ""
	}
	paths, _ := filepath.Glob(filepath.Join(from, "*.log"))
	for _, p := range paths {
		if filepath.Base(p) == "audit.log" && !audit {
			continue
		}
		data, err := os.ReadFile(p)
		if err == nil {
			err = os.WriteFile(filepath.Join(to, filepath.Base(p)), data, 0o600)
		}
		if err != nil {
			t.Log(err)
		}
	}
	return to
}

func (s *soak) report(chk *checker.Checker, f *faults, apiErrors int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== soak summary: %s, seed %d, nodes from the %s ===\n", s.duration, s.seed, s.backend.name())
	b.WriteString("events driven:\n")
	var names []string
	for k := range s.driven {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "  %5d  %s\n", s.driven[k], k)
	}
	fmt.Fprintf(&b, "  churn calls refused (API server restarting): %d\n", apiErrors)
	b.WriteString("fault timeline:\n")
	for _, line := range s.timeline {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	if len(f.recoveries) > 0 {
		var worst time.Duration
		for _, d := range f.recoveries {
			worst = max(worst, d)
		}
		fmt.Fprintf(&b, "leader back after a fault: worst %s over %d faults\n", worst.Round(100*time.Millisecond), len(f.recoveries))
	}
	b.WriteString("invariants:\n")
	b.WriteString(chk.Summary())
	for _, v := range chk.Violations() {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	for _, e := range s.errs {
		fmt.Fprintf(&b, "HARNESS ERROR %s\n", e)
	}
	// To stdout as is: make soak shows it whatever go test's verbosity.
	fmt.Print(b.String())
}
