// Package looptrigger decides when draxr-autoscaler's next loop starts.
//
// Without frequent loops a loop starts every scan interval. With them (CA's
// --frequent-loops-enabled, default true) a loop also starts:
//   - after events (a pod the scheduler found unschedulable, a
//     ProvisioningRequest or CapacityBuffer created or changed, a gang's
//     pods all present), batched: once no event has come for the idle
//     window, or the maximum window has passed since the batch's first
//     event, whichever is first;
//   - right after a productive loop (one that scaled up, removed nodes or
//     decided a ProvisioningRequest), as CA's LoopTrigger does, since what
//     that loop changed may let the next one do more; while a batch of
//     events is open, when it closes instead.
//
// Two loop starts are never closer than MinGap, except when the scan
// interval itself is shorter, and the scan interval still bounds the time
// between two loops.
package looptrigger

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// MinGap is the shortest time between two loop starts that events or a
// productive loop cause: a steady stream of pending pods makes at most one
// loop a second.
const MinGap = time.Second

// Reason says why a loop started.
type Reason string

const (
	// First is the first loop, at once.
	First Reason = "first"
	// ScanInterval: the scan interval passed since the last loop started.
	ScanInterval Reason = "scan-interval"
	// Events: a batch of events closed.
	Events Reason = "events"
	// Productive: the last loop scaled up, removed nodes or decided a
	// ProvisioningRequest.
	Productive Reason = "productive"
)

// Config is the trigger's flags.
type Config struct {
	ScanInterval time.Duration
	// FrequentLoops is CA's --frequent-loops-enabled: false means a loop
	// every ScanInterval and nothing else.
	FrequentLoops bool
	// BatchIdle closes a batch when no event has come for that long;
	// BatchMax closes it that long after its first event.
	BatchIdle, BatchMax time.Duration
}

// Trigger is safe for Notify from informer handlers while one goroutine
// calls Wait and LoopDone.
type Trigger struct {
	cfg   Config
	clock clock.Clock
	// wake interrupts a Wait when an event may have moved the next start.
	wake chan struct{}

	mu                    sync.Mutex
	started               bool
	lastStart             time.Time
	productive            bool
	firstEvent, lastEvent time.Time // zero when no batch is open
	batch                 map[string]int
}

// New returns a trigger on clk (clock.RealClock{} outside tests).
func New(cfg Config, clk clock.Clock) *Trigger {
	return &Trigger{cfg: cfg, clock: clk, wake: make(chan struct{}, 1), batch: map[string]int{}}
}

// Notify records an event of the given kind ("unschedulable pod", ...).
// It never blocks. Without frequent loops it does nothing.
func (t *Trigger) Notify(kind string) {
	if !t.cfg.FrequentLoops {
		return
	}
	t.mu.Lock()
	now := t.clock.Now()
	if t.firstEvent.IsZero() {
		t.firstEvent = now
	}
	t.lastEvent = now
	t.batch[kind]++
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// LoopDone records whether the loop that just ended was productive.
func (t *Trigger) LoopDone(productive bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.productive = productive && t.cfg.FrequentLoops
}

// Next is when the next loop is due, and why, given what has been seen so
// far; a later event can only bring it forward or leave it.
func (t *Trigger) Next() (time.Time, Reason) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next()
}

func (t *Trigger) next() (time.Time, Reason) {
	if !t.started {
		return time.Time{}, First
	}
	due, reason := t.lastStart.Add(t.cfg.ScanInterval), ScanInterval
	if !t.cfg.FrequentLoops {
		return due, reason
	}
	earliest := t.lastStart.Add(MinGap)
	// A productive loop is followed at once, unless events are still
	// coming: then the batch closes first, or a burst of pods the
	// scheduler marks over several seconds would get a scale-up a second.
	if t.productive && t.firstEvent.IsZero() && earliest.Before(due) {
		return earliest, Productive
	}
	if !t.firstEvent.IsZero() {
		closes := t.lastEvent.Add(t.cfg.BatchIdle)
		if limit := t.firstEvent.Add(t.cfg.BatchMax); limit.Before(closes) {
			closes = limit
		}
		if closes.Before(earliest) {
			closes = earliest
		}
		if closes.Before(due) {
			return closes, Events
		}
	}
	return due, reason
}

// Wait blocks until the next loop is due and returns why; false when ctx
// ended first. The loop is taken to start when Wait returns: the events
// seen until then are in the informers' caches the loop reads (a handler
// runs after its cache is updated), so they close the batch.
func (t *Trigger) Wait(ctx context.Context) (Reason, bool) {
	for {
		t.mu.Lock()
		due, reason := t.next()
		now := t.clock.Now()
		if !now.Before(due) {
			t.start(ctx, now, reason)
			t.mu.Unlock()
			return reason, true
		}
		t.mu.Unlock()
		timer := t.clock.NewTimer(due.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return "", false
		case <-t.wake:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// start records a loop start; t.mu is held.
func (t *Trigger) start(ctx context.Context, now time.Time, reason Reason) {
	if reason == Events {
		klog.FromContext(ctx).V(2).Info("Loop triggered by events", "events", t.batch,
			"sinceFirst", now.Sub(t.firstEvent), "sinceLast", now.Sub(t.lastEvent))
	} else {
		klog.FromContext(ctx).V(4).Info("Loop triggered", "reason", reason)
	}
	t.started, t.lastStart, t.productive = true, now, false
	t.firstEvent, t.lastEvent = time.Time{}, time.Time{}
	clear(t.batch)
}
