package backoff

import (
	"testing"
	"time"

	"draxr.dev/draxr/cloudprovider"
)

func TestBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quota := Reason{Class: cloudprovider.OutOfResourcesErrorClass, Code: "QUOTA_EXCEEDED", Message: "no quota"}
	type step struct {
		at        time.Duration // after t0
		fail      bool          // record a failure of "gpu" at this time
		remove    bool
		stale     bool // run RemoveStale
		wantOff   bool
		wantUntil time.Duration // after t0, when wantOff
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first failure pauses the initial duration", []step{
			{at: 0, fail: true, wantOff: true, wantUntil: 5 * time.Minute},
			{at: 5*time.Minute - time.Second, wantOff: true, wantUntil: 5 * time.Minute},
			{at: 5 * time.Minute, wantOff: false},
		}},
		{"failures after each pause double it up to the max", []step{
			{at: 0, fail: true, wantOff: true, wantUntil: 5 * time.Minute},
			{at: 6 * time.Minute, fail: true, wantOff: true, wantUntil: 16 * time.Minute},
			{at: 17 * time.Minute, fail: true, wantOff: true, wantUntil: 37 * time.Minute},
			{at: 38 * time.Minute, fail: true, wantOff: true, wantUntil: 68 * time.Minute},
			{at: 69 * time.Minute, fail: true, wantOff: true, wantUntil: 99 * time.Minute},
		}},
		{"a failure during a pause restarts it with the same length", []step{
			{at: 0, fail: true, wantOff: true, wantUntil: 5 * time.Minute},
			{at: 2 * time.Minute, fail: true, wantOff: true, wantUntil: 7 * time.Minute},
		}},
		{"success forgets the group", []step{
			{at: 0, fail: true, wantOff: true, wantUntil: 5 * time.Minute},
			{at: time.Minute, remove: true, wantOff: false},
			{at: 6 * time.Minute, fail: true, wantOff: true, wantUntil: 11 * time.Minute},
		}},
		{"reset timeout after the last failure starts over", []step{
			{at: 0, fail: true, wantOff: true, wantUntil: 5 * time.Minute},
			{at: 6 * time.Minute, fail: true, wantOff: true, wantUntil: 16 * time.Minute},
			{at: 3 * time.Hour, stale: true, wantOff: false}, // 2h54m after the last failure: kept
			{at: 3*time.Hour + time.Minute, fail: true, wantOff: true, wantUntil: 3*time.Hour + 21*time.Minute},
			{at: 6*time.Hour + 2*time.Minute, stale: true, wantOff: false},
			{at: 6*time.Hour + 3*time.Minute, fail: true, wantOff: true, wantUntil: 6*time.Hour + 8*time.Minute},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(DefaultInitial, DefaultMax, DefaultResetTimeout)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch {
				case s.fail:
					b.Backoff("gpu", quota, now)
				case s.remove:
					b.Remove("gpu")
				case s.stale:
					b.RemoveStale(now)
				}
				st := b.Status("gpu", now)
				if st.BackedOff != s.wantOff {
					t.Fatalf("step %d (t+%s): backed off = %v, want %v", i, s.at, st.BackedOff, s.wantOff)
				}
				if s.wantOff && !st.Until.Equal(t0.Add(s.wantUntil)) {
					t.Fatalf("step %d (t+%s): backed off until t+%s, want t+%s", i, s.at, st.Until.Sub(t0), s.wantUntil)
				}
				if s.wantOff && st.Reason != quota {
					t.Fatalf("step %d: reason = %+v, want %+v", i, st.Reason, quota)
				}
			}
			if b.IsBackedOff("other", t0) {
				t.Error("a group that never failed is backed off")
			}
		})
	}
}
