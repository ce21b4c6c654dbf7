// Package health is draxr-autoscaler's /health-check with the Cluster
// Autoscaler's rules: unhealthy when no loop started for --max-inactivity
// or none succeeded for --max-failing-time; until the first success both
// limits are --max-startup-time (raised to at least the other two). A
// replica that is not the leader runs no loop and is healthy: monitoring
// starts with the loop.
package health

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// CA's defaults.
const (
	DefaultMaxInactivity  = 10 * time.Minute
	DefaultMaxFailingTime = 15 * time.Minute
	DefaultMaxStartupTime = 20 * time.Minute
)

// Check tracks loop activity; it is safe for concurrent use (the loop
// writes, HTTP handlers read).
type Check struct {
	maxInactivity, maxFailing, maxStartup time.Duration
	now                                   func() time.Time

	mu           sync.Mutex
	monitoring   bool
	lastActivity time.Time
	lastSuccess  time.Time
	succeeded    bool
}

// New returns a check that is healthy until StartMonitoring.
func New(maxInactivity, maxFailing, maxStartup time.Duration, now func() time.Time) *Check {
	if now == nil {
		now = time.Now
	}
	return &Check{maxInactivity: maxInactivity, maxFailing: maxFailing,
		maxStartup: max(maxStartup, maxInactivity, maxFailing), now: now}
}

// StartMonitoring is called when this replica's loop starts (after it won
// the leader lease).
func (c *Check) StartMonitoring() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.monitoring {
		return
	}
	now := c.now()
	c.monitoring, c.lastActivity, c.lastSuccess, c.succeeded = true, now, now, false
}

// StopMonitoring is called when the loop stops (lease lost, shutting down).
func (c *Check) StopMonitoring() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.monitoring = false
}

// LoopStarted records the start of a loop.
func (c *Check) LoopStarted() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastActivity = c.now()
}

// LoopSucceeded records a loop that finished without error.
func (c *Check) LoopSucceeded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSuccess, c.succeeded = c.now(), true
}

// Err is nil when healthy, else CA's message.
func (c *Check) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.monitoring {
		return nil
	}
	inactivity, failing := c.maxInactivity, c.maxFailing
	if !c.succeeded {
		inactivity, failing = c.maxStartup, c.maxStartup
	}
	now := c.now()
	sinceActivity, sinceSuccess := now.Sub(c.lastActivity), now.Sub(c.lastSuccess)
	if sinceActivity > inactivity || sinceSuccess > failing {
		return fmt.Errorf("Error: last activity more than %v ago, last success more than %v ago", sinceActivity, sinceSuccess) //nolint:staticcheck // CA's text
	}
	return nil
}

// ServeHTTP answers 200 "OK" or 500 with the reason.
func (c *Check) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if err := c.Err(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("OK"))
}
