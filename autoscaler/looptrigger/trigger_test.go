package looptrigger

import (
	"context"
	"slices"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

const ms = time.Millisecond

// defaults are the flags' defaults: CA's 10s scan, a 1s idle window and a
// 10s maximum.
var defaults = Config{ScanInterval: 10 * time.Second, FrequentLoops: true, BatchIdle: time.Second, BatchMax: 10 * time.Second}

// loopStart is when a loop started, after t0, and why.
type loopStart struct {
	at     time.Duration
	reason Reason
}

// timeline is events, loops that take loopTime each, and which loops
// (by number, the first is 0) are productive, until the end.
type timeline struct {
	cfg        Config
	events     []time.Duration
	loopTime   time.Duration
	productive []int
	end        time.Duration
}

// run plays the timeline on a fake clock and returns when each loop
// started. Wait is only called once the next loop is due, so it returns
// at once and the run needs no goroutine.
func (tl timeline) run(t *testing.T) []loopStart {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	trig := New(tl.cfg, clk)
	ctx := context.Background()
	notifyUntil := func(until time.Time, inclusive bool) {
		for len(tl.events) > 0 {
			at := t0.Add(tl.events[0])
			if at.After(until) || (!inclusive && at.Equal(until)) {
				return
			}
			if at.After(clk.Now()) {
				clk.SetTime(at)
			}
			trig.Notify("unschedulable pod")
			tl.events = tl.events[1:]
		}
	}
	var starts []loopStart
	for {
		due, _ := trig.Next()
		if due.IsZero() {
			due = clk.Now()
		}
		if len(tl.events) > 0 && t0.Add(tl.events[0]).Before(due) {
			notifyUntil(t0.Add(tl.events[0]), true)
			continue
		}
		if due.Sub(t0) > tl.end {
			return starts
		}
		if due.After(clk.Now()) {
			clk.SetTime(due)
		}
		now := clk.Now()
		reason, ok := trig.Wait(ctx)
		if !ok || !clk.Now().Equal(now) {
			t.Fatalf("Wait returned %v at %v, want at once at %v", ok, clk.Now().Sub(t0), now.Sub(t0))
		}
		starts = append(starts, loopStart{clk.Now().Sub(t0), reason})
		loopEnd := clk.Now().Add(tl.loopTime)
		notifyUntil(loopEnd, true)
		clk.SetTime(loopEnd)
		trig.LoopDone(slices.Contains(tl.productive, len(starts)-1))
	}
}

// every is n events, gap apart, from start.
func every(start, gap time.Duration, n int) []time.Duration {
	var out []time.Duration
	for i := range n {
		out = append(out, start+time.Duration(i)*gap)
	}
	return out
}

func TestLoopStarts(t *testing.T) {
	noIdle := defaults
	noIdle.BatchIdle = 0
	slowScan := defaults
	slowScan.ScanInterval = 30 * time.Second
	off := defaults
	off.FrequentLoops = false
	tests := []struct {
		name string
		tl   timeline
		// want is every loop start; wantEventLoops counts the loops events
		// started (when want is not given).
		want           []loopStart
		wantEventLoops int
	}{
		{name: "no events: a loop every scan interval",
			tl:   timeline{cfg: defaults, loopTime: 100 * ms, end: 35 * time.Second},
			want: []loopStart{{0, First}, {10 * time.Second, ScanInterval}, {20 * time.Second, ScanInterval}, {30 * time.Second, ScanInterval}}},
		{name: "one unschedulable pod: a loop once the idle window passed",
			tl:   timeline{cfg: defaults, events: []time.Duration{3 * time.Second}, loopTime: 100 * ms, end: 20 * time.Second},
			want: []loopStart{{0, First}, {4 * time.Second, Events}, {14 * time.Second, ScanInterval}}},
		{name: "each event restarts the idle window",
			tl:   timeline{cfg: defaults, events: []time.Duration{3 * time.Second, 3500 * ms, 4200 * ms}, loopTime: 100 * ms, end: 10 * time.Second},
			want: []loopStart{{0, First}, {5200 * ms, Events}}},
		{name: "events never idle for the idle window: the batch closes at the maximum",
			tl: timeline{cfg: slowScan, events: every(2*time.Second, 300*ms, 78), loopTime: 100 * ms, end: 30 * time.Second},
			// 2s + 10s; the next batch's first event is at 12.2s, so it
			// closes at 22.2s; the third's first is at 22.4s and the last
			// event at 25.1s, so it closes idle at 26.1s.
			want: []loopStart{{0, First}, {12 * time.Second, Events}, {22200 * ms, Events}, {26100 * ms, Events}}},
		{name: "a burst of 1,000 pods in 5 s: one loop",
			tl:   timeline{cfg: defaults, events: every(time.Second, 5*ms, 1000), loopTime: 100 * ms, end: 15 * time.Second},
			want: []loopStart{{0, First}, {6995 * ms, Events}}},
		{name: "a steady stream with no idle window: one loop a second, not one per pod",
			tl:             timeline{cfg: noIdle, events: every(500*ms, 100*ms, 600), loopTime: 100 * ms, end: 60 * time.Second},
			wantEventLoops: 60},
		{name: "a pod every 1.2 s: a loop for each, 1 s after it",
			tl:             timeline{cfg: defaults, events: every(time.Second, 1200*ms, 40), loopTime: 100 * ms, end: 50 * time.Second},
			wantEventLoops: 40},
		{name: "a productive loop: the next starts a second after it started, then back to the scan interval",
			tl:   timeline{cfg: defaults, loopTime: 300 * ms, productive: []int{0, 1}, end: 15 * time.Second},
			want: []loopStart{{0, First}, {time.Second, Productive}, {2 * time.Second, Productive}, {12 * time.Second, ScanInterval}}},
		{name: "a productive loop while a burst goes on: the next loop when the batch closes",
			// A first pod at 0.5s gets its loop at 1.5s, which scales up;
			// 1,000 more pods come from 1.7s over 5s: one loop for them,
			// 1s after the last, not one a second while they come.
			tl: timeline{cfg: defaults, events: append([]time.Duration{500 * ms}, every(1700*ms, 5*ms, 1000)...), loopTime: 100 * ms,
				productive: []int{1, 2}, end: 9 * time.Second},
			want: []loopStart{{0, First}, {1500 * ms, Events}, {7695 * ms, Events}, {8695 * ms, Productive}}},
		{name: "an event during a loop is seen after it",
			tl:   timeline{cfg: defaults, events: []time.Duration{time.Second}, loopTime: 2 * time.Second, end: 5 * time.Second},
			want: []loopStart{{0, First}, {2 * time.Second, Events}}},
		{name: "events the scan-interval loop already saw start no loop",
			tl:   timeline{cfg: defaults, events: []time.Duration{9500 * ms}, loopTime: 100 * ms, end: 25 * time.Second},
			want: []loopStart{{0, First}, {10 * time.Second, ScanInterval}, {20 * time.Second, ScanInterval}}},
		{name: "a loop longer than the scan interval: the next starts when it ends",
			tl:   timeline{cfg: defaults, loopTime: 12 * time.Second, end: 30 * time.Second},
			want: []loopStart{{0, First}, {12 * time.Second, ScanInterval}, {24 * time.Second, ScanInterval}}},
		{name: "frequent loops off: events and productive loops change nothing",
			tl: timeline{cfg: off, events: every(time.Second, 100*ms, 100), loopTime: 100 * ms, productive: []int{0, 1, 2},
				end: 25 * time.Second},
			want: []loopStart{{0, First}, {10 * time.Second, ScanInterval}, {20 * time.Second, ScanInterval}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tl.run(t)
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("loops started at %v, want %v", got, tc.want)
			}
			events := 0
			for i, s := range got {
				if s.reason == Events {
					events++
				}
				if i == 0 {
					continue
				}
				gap := s.at - got[i-1].at
				if gap < min(MinGap, tc.tl.cfg.ScanInterval) {
					t.Errorf("loops %d and %d started %v apart, less than %v", i-1, i, gap, MinGap)
				}
				if gap > max(tc.tl.cfg.ScanInterval, tc.tl.loopTime) {
					t.Errorf("loops %d and %d started %v apart, more than the scan interval %v", i-1, i, gap, tc.tl.cfg.ScanInterval)
				}
			}
			if tc.want == nil && events != tc.wantEventLoops {
				t.Errorf("%d loops started by events (%v), want %d", events, got, tc.wantEventLoops)
			}
		})
	}
}

// Wait sleeps on the clock: an event wakes it, and the loop starts once
// the idle window has passed; without events the scan interval ends the
// wait; a cancelled context ends it with false.
func TestWaitSleeps(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	trig := New(defaults, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if r, ok := trig.Wait(ctx); !ok || r != First {
		t.Fatalf("first Wait = %v, %v, want %v at once", r, ok, First)
	}
	trig.LoopDone(false)
	type result struct {
		reason Reason
		ok     bool
		at     time.Duration
	}
	wait := func() <-chan result {
		done := make(chan result, 1)
		go func() {
			r, ok := trig.Wait(ctx)
			done <- result{r, ok, clk.Since(t0)}
		}()
		for !clk.HasWaiters() {
			time.Sleep(ms)
		}
		return done
	}

	done := wait()
	clk.Step(2 * time.Second)
	trig.Notify("unschedulable pod")
	// Whether Wait re-arms its timer before or after this step, it returns
	// the loop due 1s after the event.
	clk.Step(time.Second)
	if r := <-done; !r.ok || r.reason != Events || r.at != 3*time.Second {
		t.Errorf("after an event at 2s: %+v, want %v at 3s", r, Events)
	}
	trig.LoopDone(false)

	done = wait()
	clk.Step(10 * time.Second)
	if r := <-done; !r.ok || r.reason != ScanInterval || r.at != 13*time.Second {
		t.Errorf("without events: %+v, want %v at 13s", r, ScanInterval)
	}
	trig.LoopDone(false)

	done = wait()
	cancel()
	if r := <-done; r.ok {
		t.Errorf("after cancel: %+v, want false", r)
	}
}

// With EarlyStart a batch's loop starts at its first event and its
// scale-up waits for the batch to close; an event after the loop started
// supersedes it, and the batch gets the loop it would have had without
// EarlyStart. A loop that asks for no nodes and saw every event of its
// batch ends the batch.
func TestEarlyStart(t *testing.T) {
	early := defaults
	early.EarlyStart = true
	ctx := context.Background()
	setup := func(t *testing.T) (*testingclock.FakeClock, *Trigger) {
		clk := testingclock.NewFakeClock(t0)
		trig := New(early, clk)
		if r, ok := trig.Wait(ctx); !ok || r != First {
			t.Fatalf("first Wait = %v, %v", r, ok)
		}
		trig.LoopDone(false)
		return clk, trig
	}
	waitAt := func(t *testing.T, clk *testingclock.FakeClock, trig *Trigger, at time.Duration, want Reason) {
		t.Helper()
		due, reason := trig.Next()
		if due.Sub(t0) != at || reason != want {
			t.Fatalf("next loop %v at %v, want %v at %v", reason, due.Sub(t0), want, at)
		}
		clk.SetTime(due)
		if r, ok := trig.Wait(ctx); !ok || r != want {
			t.Fatalf("Wait = %v, %v, want %v", r, ok, want)
		}
	}
	// openedAt3s is a trigger whose batch opened with an event at 3s
	// and started its loop.
	openedAt3s := func(t *testing.T) (*testingclock.FakeClock, *Trigger) {
		t.Helper()
		clk, trig := setup(t)
		clk.SetTime(t0.Add(3 * time.Second))
		trig.Notify("unschedulable pod")
		waitAt(t, clk, trig, 3*time.Second, EventsOpened)
		return clk, trig
	}
	// hold runs Hold in the background and returns what it said and
	// when, after the clock was stepped by step.
	hold := func(clk *testingclock.FakeClock, trig *Trigger, step time.Duration) (bool, time.Duration) {
		done := make(chan bool, 1)
		go func() { done <- trig.Hold(ctx) }()
		for !clk.HasWaiters() {
			time.Sleep(ms)
		}
		clk.Step(step)
		return <-done, clk.Since(t0)
	}

	t.Run("one pod: the loop starts at once and scales up when the idle window passed", func(t *testing.T) {
		clk, trig := openedAt3s(t)
		clk.Step(300 * ms) // the loop's planning
		if ok, at := hold(clk, trig, 700*ms); !ok || at != 4*time.Second {
			t.Fatalf("Hold = %v at %v, want true at 4s", ok, at)
		}
		trig.LoopDone(true)
		waitAt(t, clk, trig, 4*time.Second, Productive)
		trig.LoopDone(false)
		waitAt(t, clk, trig, 14*time.Second, ScanInterval)
	})
	t.Run("a loop longer than the idle window goes ahead at once", func(t *testing.T) {
		clk, trig := openedAt3s(t)
		clk.Step(1500 * ms)
		if !trig.Hold(ctx) {
			t.Fatal("Hold after the batch closed = false, want true")
		}
	})
	t.Run("a burst of 1,000 pods in 5s: the first loop is superseded, one loop scales up", func(t *testing.T) {
		clk, trig := setup(t)
		clk.SetTime(t0.Add(time.Second))
		trig.Notify("unschedulable pod")
		waitAt(t, clk, trig, time.Second, EventsOpened)
		for i := 1; i < 1000; i++ {
			clk.SetTime(t0.Add(time.Second + time.Duration(i)*5*ms))
			trig.Notify("unschedulable pod")
			if i == 20 && trig.Hold(ctx) {
				t.Fatal("Hold after later events = true, want false (superseded)")
			}
			if i == 20 {
				trig.LoopDone(false)
			}
		}
		waitAt(t, clk, trig, 6995*ms, Events)
		if !trig.Hold(ctx) {
			t.Fatal("Hold in the batch's own loop = false, want true")
		}
	})
	t.Run("an event while the loop holds supersedes it at once", func(t *testing.T) {
		clk, trig := openedAt3s(t)
		done := make(chan bool, 1)
		go func() { done <- trig.Hold(ctx) }()
		for !clk.HasWaiters() {
			time.Sleep(ms)
		}
		clk.Step(200 * ms)
		trig.Notify("unschedulable pod")
		if <-done {
			t.Fatal("Hold = true after an event during the hold, want false")
		}
		trig.LoopDone(false)
		waitAt(t, clk, trig, 4200*ms, Events)
	})
	t.Run("a loop that asks for no nodes and saw the whole batch ends it", func(t *testing.T) {
		clk, trig := openedAt3s(t)
		clk.Step(100 * ms)
		trig.LoopDone(false)
		waitAt(t, clk, trig, 13*time.Second, ScanInterval)
	})
	t.Run("events after such a loop started get their loop when the batch closes", func(t *testing.T) {
		clk, trig := openedAt3s(t)
		clk.Step(100 * ms)
		trig.Notify("unschedulable pod")
		trig.LoopDone(false)
		waitAt(t, clk, trig, 4100*ms, Events)
	})
	t.Run("the first event soon after a loop: the loop starts a second after that one", func(t *testing.T) {
		clk, trig := setup(t)
		clk.SetTime(t0.Add(500 * ms))
		trig.Notify("unschedulable pod")
		waitAt(t, clk, trig, time.Second, EventsOpened)
	})
	t.Run("a loop not started early goes ahead at once", func(t *testing.T) {
		_, trig := setup(t)
		if !trig.Hold(ctx) {
			t.Fatal("Hold in the first loop = false, want true")
		}
	})
}
