// Package backoff keeps node groups whose scale-up failed out of scale-up
// for a while, growing the pause exponentially, with the Cluster
// Autoscaler's rules (--initial-node-group-backoff-duration,
// --max-node-group-backoff-duration, --node-group-backoff-reset-timeout).
package backoff

import (
	"time"

	"draxr.dev/draxr/cloudprovider"
)

// CA's defaults.
const (
	DefaultInitial      = 5 * time.Minute
	DefaultMax          = 30 * time.Minute
	DefaultResetTimeout = 3 * time.Hour
)

// Reason is why a group was backed off, shown in the status ConfigMap.
type Reason struct {
	Class   cloudprovider.ErrorClass
	Code    string // e.g. "cloudProviderError", "timeout"
	Message string
}

// Status of one group at a given time.
type Status struct {
	BackedOff bool
	Until     time.Time
	Reason    Reason
}

type entry struct {
	duration    time.Duration
	until       time.Time
	lastFailure time.Time
	reason      Reason
}

// Backoff tracks groups by id. It is used by the loop's goroutine only.
type Backoff struct {
	initial, max, resetTimeout time.Duration
	entries                    map[string]*entry
}

// New returns a Backoff; zero durations take CA's defaults.
func New(initial, max, resetTimeout time.Duration) *Backoff {
	if initial <= 0 {
		initial = DefaultInitial
	}
	if max <= 0 {
		max = DefaultMax
	}
	if resetTimeout <= 0 {
		resetTimeout = DefaultResetTimeout
	}
	return &Backoff{initial: initial, max: max, resetTimeout: resetTimeout, entries: map[string]*entry{}}
}

// Backoff records a failure of group at now and returns when the pause
// ends. A failure during a pause restarts it with the same length (several
// failures of one scale-up must not compound); one after a pause doubles
// it, up to the maximum.
func (b *Backoff) Backoff(group string, reason Reason, now time.Time) time.Time {
	d := b.initial
	if e, ok := b.entries[group]; ok {
		d = e.duration
		if !e.until.After(now) {
			d = min(2*e.duration, b.max)
		}
	}
	e := &entry{duration: d, until: now.Add(d), lastFailure: now, reason: reason}
	b.entries[group] = e
	return e.until
}

// Status says whether group is backed off at now, and why.
func (b *Backoff) Status(group string, now time.Time) Status {
	e, ok := b.entries[group]
	if !ok || !e.until.After(now) {
		return Status{}
	}
	return Status{BackedOff: true, Until: e.until, Reason: e.reason}
}

// IsBackedOff is Status(group, now).BackedOff.
func (b *Backoff) IsBackedOff(group string, now time.Time) bool {
	return b.Status(group, now).BackedOff
}

// Remove forgets group's failures: its scale-up succeeded.
func (b *Backoff) Remove(group string) { delete(b.entries, group) }

// RemoveStale forgets groups whose last failure is older than the reset
// timeout, so the next failure starts again at the initial duration.
func (b *Backoff) RemoveStale(now time.Time) {
	for g, e := range b.entries {
		if e.lastFailure.Add(b.resetTimeout).Before(now) {
			delete(b.entries, g)
		}
	}
}
