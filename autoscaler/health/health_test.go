package health

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at        time.Duration
		do        string // "", "start", "stop", "loop" (started), "ok" (succeeded)
		wantError bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"standby replica never monitored is healthy", []step{
			{at: 0}, {at: time.Hour}, {at: 100 * time.Hour},
		}},
		{"startup: max-startup-time before the first success", []step{
			{at: 0, do: "start"},
			{at: 19 * time.Minute, do: "loop"},
			{at: 20 * time.Minute}, // exactly 20m since the start: not more
			{at: 20*time.Minute + time.Second, wantError: true},
		}},
		{"after a success: max-failing-time without another", []step{
			{at: 0, do: "start"},
			{at: time.Minute, do: "ok"},
			{at: 10 * time.Minute, do: "loop"},
			{at: 16 * time.Minute}, // exactly 15m since the success: not more
			{at: 16*time.Minute + time.Second, wantError: true},
		}},
		{"after a success: max-inactivity without a loop start", []step{
			{at: 0, do: "start"},
			{at: time.Minute, do: "loop"},
			{at: time.Minute, do: "ok"},
			{at: 11 * time.Minute},
			{at: 11*time.Minute + time.Second, wantError: true},
			{at: 12 * time.Minute, do: "loop"},
			{at: 12 * time.Minute, do: "ok"},
			{at: 12 * time.Minute},
		}},
		{"losing the lease stops monitoring", []step{
			{at: 0, do: "start"},
			{at: time.Minute, do: "stop"},
			{at: time.Hour},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			c := New(DefaultMaxInactivity, DefaultMaxFailingTime, DefaultMaxStartupTime, func() time.Time { return now })
			for i, s := range tc.steps {
				now = t0.Add(s.at)
				switch s.do {
				case "start":
					c.StartMonitoring()
				case "stop":
					c.StopMonitoring()
				case "loop":
					c.LoopStarted()
				case "ok":
					c.LoopSucceeded()
				}
				rec := httptest.NewRecorder()
				c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health-check", nil))
				if got := rec.Code != http.StatusOK; got != s.wantError {
					t.Fatalf("step %d (t+%v): status %d %q, want error %v", i, s.at, rec.Code, rec.Body.String(), s.wantError)
				}
				if s.wantError && !strings.Contains(rec.Body.String(), "Error: last activity more than") {
					t.Fatalf("step %d: body %q, want CA's message", i, rec.Body.String())
				}
				if !s.wantError && rec.Body.String() != "OK" {
					t.Fatalf("step %d: body %q, want OK", i, rec.Body.String())
				}
			}
		})
	}
}
