package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/simulator/drainability"
)

// CA's names and defaults for the scale-down safety flags.
func TestScaleDownSafetyFlagDefaults(t *testing.T) {
	o := &options{}
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"skip-nodes-with-local-storage": "true", "skip-nodes-with-system-pods": "true", "skip-nodes-with-custom-controller-pods": "true",
		"max-graceful-termination-sec": "600", "scale-down-delay-after-delete": "0s", "scale-down-delay-after-failure": "3m0s",
		"scale-down-unready-time": "20m0s", "max-scale-down-parallelism": "10", "max-drain-parallelism": "1",
		"scale-down-simulation-timeout": "30s", "max-bulk-soft-taint-count": "10", "max-bulk-soft-taint-time": "3s",
	}
	for name, def := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("--%s missing", name)
			continue
		}
		if f.DefValue != def || f.Usage == "" {
			t.Errorf("--%s default %q (help %q), want %q with help", name, f.DefValue, f.Usage, def)
		}
	}
	got := o.scaleDownSafety.actuation()
	wantAct := core.ScaleDownActuation{Drainability: drainability.DefaultOptions(), DelayAfterFailure: 3 * time.Minute,
		UnreadyTime: 20 * time.Minute, MaxScaleDownParallelism: 10, MaxDrainParallelism: 1, MaxGracefulTermination: 600 * time.Second,
		MaxBulkSoftTaintCount: 10, MaxBulkSoftTaintTime: 3 * time.Second}
	if got != wantAct {
		t.Errorf("actuation = %+v, want %+v", got, wantAct)
	}
	// CA's 0 (count or time) taints no node: the core's negative count.
	for _, args := range [][]string{{"--max-bulk-soft-taint-count=0"}, {"--max-bulk-soft-taint-time=0s"}} {
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if got := o.scaleDownSafety.actuation().MaxBulkSoftTaintCount; got >= 0 {
			t.Errorf("%v: soft-taint count %d, want negative (none)", args, got)
		}
		_ = fs.Parse([]string{"--max-bulk-soft-taint-count=10", "--max-bulk-soft-taint-time=3s"})
	}
}

func TestScaleDownSafetyFlagValidation(t *testing.T) {
	tests := []struct {
		arg  string
		want string
	}{
		{"--max-graceful-termination-sec=-1", "--max-graceful-termination-sec must be >= 0"},
		{"--scale-down-delay-after-delete=-1s", "--scale-down-delay-after-delete must be >= 0"},
		{"--scale-down-delay-after-failure=-1s", "--scale-down-delay-after-failure must be >= 0"},
		{"--scale-down-unready-time=-1s", "--scale-down-unready-time must be >= 0"},
		{"--max-scale-down-parallelism=0", "--max-scale-down-parallelism must be >= 1"},
		{"--max-drain-parallelism=0", "--max-drain-parallelism must be >= 1"},
		{"--scale-down-simulation-timeout=0s", "--scale-down-simulation-timeout must be positive"},
		{"--max-bulk-soft-taint-count=-1", "--max-bulk-soft-taint-count must be >= 0"},
		{"--max-bulk-soft-taint-time=-1s", "--max-bulk-soft-taint-time must be >= 0"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			o := &options{}
			fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse([]string{"--node-group-config=g.yaml", tc.arg}); err != nil {
				t.Fatal(err)
			}
			if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
