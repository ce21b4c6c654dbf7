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
//
// With EarlyStart a batch's loop starts at its first event instead, and
// holds its first scale-up (Hold) until the batch closes: the loop's work
// runs while the idle window passes instead of after it. An event after
// the loop started supersedes it: it asks for no nodes and the batch, with
// the new events, gets a loop when it closes, so a burst still gets one
// scale-up.
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
	// EventsOpened: a batch's first event, with EarlyStart: the loop holds
	// its scale-up until the batch closes.
	EventsOpened Reason = "events-opened"
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
	// EarlyStart starts a batch's loop at its first event; the loop's
	// scale-up waits for the batch to close (Hold).
	EarlyStart bool
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
	// events counts every event; early is set while a loop that started
	// at its batch's first event runs, eventsAtStart the count then;
	// earlyTried keeps a batch from starting a second such loop.
	events        int
	early         bool
	eventsAtStart int
	earlyTried    bool
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
	t.events++
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// LoopDone records whether the loop that just ended was productive. A
// loop started at its batch's first event that asked for no nodes saw
// the whole batch if no event came after it started: the batch is done.
func (t *Trigger) LoopDone(productive bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.productive = productive && t.cfg.FrequentLoops
	if t.early && t.events == t.eventsAtStart {
		t.closeBatch()
	}
	t.early = false
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
		if t.cfg.EarlyStart && !t.earlyTried {
			opened := t.firstEvent
			if opened.Before(earliest) {
				opened = earliest
			}
			if opened.Before(due) {
				return opened, EventsOpened
			}
		}
		closes := t.closes()
		if closes.Before(earliest) {
			closes = earliest
		}
		if closes.Before(due) {
			return closes, Events
		}
	}
	return due, reason
}

// closes is when the open batch closes; t.mu is held.
func (t *Trigger) closes() time.Time {
	closes := t.lastEvent.Add(t.cfg.BatchIdle)
	if limit := t.firstEvent.Add(t.cfg.BatchMax); limit.Before(closes) {
		closes = limit
	}
	return closes
}

// closeBatch ends the open batch; t.mu is held.
func (t *Trigger) closeBatch() {
	t.firstEvent, t.lastEvent = time.Time{}, time.Time{}
	clear(t.batch)
	t.earlyTried = false
}

// Hold is called by a loop before its first scale-up. A loop started at
// its batch's first event waits until the batch closes and goes ahead
// (true) if no event came after it started; at the first event that did,
// it returns false: the loop is superseded and asks for no nodes, and the
// batch's loop starts when it closes. Any other loop goes ahead at once.
// false also when ctx ends.
func (t *Trigger) Hold(ctx context.Context) bool {
	for {
		t.mu.Lock()
		if !t.early {
			t.mu.Unlock()
			return true
		}
		if t.events != t.eventsAtStart {
			klog.FromContext(ctx).V(2).Info("Loop superseded by later events; the batch gets its own loop", "events", t.batch)
			t.early = false
			t.mu.Unlock()
			return false
		}
		closes, now := t.closes(), t.clock.Now()
		if !now.Before(closes) {
			klog.FromContext(ctx).V(2).Info("Loop's batch closed; going ahead", "events", t.batch,
				"sinceFirst", now.Sub(t.firstEvent), "sinceLast", now.Sub(t.lastEvent))
			t.early = false
			t.closeBatch()
			t.mu.Unlock()
			return true
		}
		t.mu.Unlock()
		if !t.sleep(ctx, closes.Sub(now)) {
			return false
		}
	}
}

// sleep waits d, or less when an event may have moved what is waited
// for; false when ctx ended first.
func (t *Trigger) sleep(ctx context.Context, d time.Duration) bool {
	timer := t.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.wake:
	case <-timer.C():
	}
	return true
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
		if !t.sleep(ctx, due.Sub(now)) {
			return "", false
		}
	}
}

// start records a loop start; t.mu is held.
func (t *Trigger) start(ctx context.Context, now time.Time, reason Reason) {
	switch reason {
	case Events, EventsOpened:
		klog.FromContext(ctx).V(2).Info("Loop triggered by events", "events", t.batch, "early", reason == EventsOpened,
			"sinceFirst", now.Sub(t.firstEvent), "sinceLast", now.Sub(t.lastEvent))
	default:
		klog.FromContext(ctx).V(4).Info("Loop triggered", "reason", reason)
	}
	t.started, t.lastStart, t.productive = true, now, false
	if reason == EventsOpened {
		// The batch stays open: the loop's scale-up waits for it (Hold).
		t.early, t.earlyTried, t.eventsAtStart = true, true, t.events
		return
	}
	t.early = false
	t.closeBatch()
}
