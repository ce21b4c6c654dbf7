package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/autoscaler/looptrigger"
)

// The loop's flags as a user gives them: CA's --frequent-loops-enabled is
// supported, the batching windows default to 1s and 10s, lowered to a
// shorter --scan-interval, and a window given negative or longer than the
// scan interval stops the start naming the flag.
func TestLoopFlags(t *testing.T) {
	base := []string{"--node-group-config=g.yaml"}
	tests := []struct {
		args     []string
		want     looptrigger.Config
		err      string
		warnings []string
	}{
		{args: nil, want: looptrigger.Config{ScanInterval: 10 * time.Second, FrequentLoops: true, BatchIdle: time.Second, BatchMax: 10 * time.Second, EarlyStart: true}},
		{args: []string{"--scan-interval=1s"},
			want: looptrigger.Config{ScanInterval: time.Second, FrequentLoops: true, BatchIdle: time.Second, BatchMax: time.Second, EarlyStart: true}},
		{args: []string{"--scan-interval=500ms"},
			want: looptrigger.Config{ScanInterval: 500 * time.Millisecond, FrequentLoops: true, BatchIdle: 500 * time.Millisecond, BatchMax: 500 * time.Millisecond, EarlyStart: true}},
		{args: []string{"--scan-interval=30s", "--event-batch-idle-duration=0", "--event-batch-max-duration=30s"},
			want: looptrigger.Config{ScanInterval: 30 * time.Second, FrequentLoops: true, BatchIdle: 0, BatchMax: 30 * time.Second, EarlyStart: true}},
		{args: []string{"--event-batch-early-start=false"},
			want: looptrigger.Config{ScanInterval: 10 * time.Second, FrequentLoops: true, BatchIdle: time.Second, BatchMax: 10 * time.Second}},
		{args: []string{"--frequent-loops-enabled=false"}, want: looptrigger.Config{ScanInterval: 10 * time.Second, BatchIdle: time.Second, BatchMax: 10 * time.Second, EarlyStart: true}},
		{args: []string{"--frequent-loops-enabled=false", "--event-batch-max-duration=5s"},
			want:     looptrigger.Config{ScanInterval: 10 * time.Second, BatchIdle: time.Second, BatchMax: 5 * time.Second, EarlyStart: true},
			warnings: []string{"--event-batch-max-duration has no effect with --frequent-loops-enabled=false"}},
		{args: []string{"--event-batch-idle-duration=-1s"}, err: "--event-batch-idle-duration must be >= 0, got -1s"},
		{args: []string{"--event-batch-max-duration=-5s"}, err: "--event-batch-max-duration must be >= 0, got -5s"},
		{args: []string{"--event-batch-max-duration=20s"}, err: "--event-batch-max-duration 20s is longer than --scan-interval 10s"},
		{args: []string{"--scan-interval=1s", "--event-batch-idle-duration=2s"}, err: "--event-batch-idle-duration 2s is longer than --scan-interval 1s"},
		{args: []string{"--scan-interval=5s", "--event-batch-max-duration=10s"}, err: "--event-batch-max-duration 10s is longer than --scan-interval 5s"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addAllFlags(fs)
			compat := addCompatFlags(fs)
			if err := fs.Parse(append(base, tc.args...)); err != nil {
				t.Fatal(err)
			}
			warnings, err := o.check(compat, fs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("check() = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("check() = %v, want valid", err)
			}
			if got := o.trigger(); got != tc.want {
				t.Errorf("trigger config %+v, want %+v", got, tc.want)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %q", warnings, tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.HasPrefix(warnings[i], w) {
					t.Errorf("warning %q, want %q", warnings[i], w)
				}
			}
		})
	}
}
