package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/autoscaler/looptrigger"
)

// loopOptions say when a loop starts: CA's --frequent-loops-enabled and
// draxr's event batching windows (autoscaler/looptrigger).
type loopOptions struct {
	frequentLoops   bool
	eventBatchIdle  time.Duration
	eventBatchMax   time.Duration
	eventBatchEarly bool
}

const (
	flagEventBatchIdle  = "event-batch-idle-duration"
	flagEventBatchMax   = "event-batch-max-duration"
	flagEventBatchEarly = "event-batch-early-start"
)

func (o *loopOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.frequentLoops, "frequent-loops-enabled", true,
		"if true, a loop also starts soon after events (a pod the scheduler found unschedulable, a ProvisioningRequest or CapacityBuffer "+
			"created or given a new spec, the last pod of a gang), batched by --"+flagEventBatchIdle+" and --"+flagEventBatchMax+
			", and right after a loop that scaled up, removed nodes or decided a ProvisioningRequest; two such loops start at least 1s apart. "+
			"false: a loop every --scan-interval only")
	fs.DurationVar(&o.eventBatchIdle, flagEventBatchIdle, time.Second,
		"with --frequent-loops-enabled: events start a loop once none has come for this long (0: at once); at most --scan-interval, "+
			"and the default is lowered to a shorter --scan-interval")
	fs.DurationVar(&o.eventBatchMax, flagEventBatchMax, 10*time.Second,
		"with --frequent-loops-enabled: events start a loop at the latest this long after the first of them, even while more keep coming; "+
			"at most --scan-interval, and the default is lowered to a shorter --scan-interval")
	fs.BoolVar(&o.eventBatchEarly, flagEventBatchEarly, true,
		"with --frequent-loops-enabled: a batch's loop starts at its first event and holds its scale-up until the batch closes "+
			"(its planning runs while the batch waits); an event after it started makes it ask for nothing, and the batch gets "+
			"its loop when it closes. false: the loop starts when the batch closes")
}

// loopDefaults lowers the batching windows left at their defaults to the
// scan interval: the scan starts a loop by then anyway, and
// --scan-interval=1s alone must not be a flag error.
func (o *options) loopDefaults(fs *pflag.FlagSet) {
	for name, d := range map[string]*time.Duration{flagEventBatchIdle: &o.eventBatchIdle, flagEventBatchMax: &o.eventBatchMax} {
		if !fs.Changed(name) && o.scanInterval > 0 {
			*d = min(*d, o.scanInterval)
		}
	}
}

// loopWarnings name the batching flags given with frequent loops off.
func (o *options) loopWarnings(fs *pflag.FlagSet) []string {
	var warnings []string
	for _, name := range []string{flagEventBatchIdle, flagEventBatchMax, flagEventBatchEarly} {
		if !o.frequentLoops && fs.Changed(name) {
			warnings = append(warnings, fmt.Sprintf("--%s has no effect with --frequent-loops-enabled=false: loops start every --scan-interval only", name))
		}
	}
	return warnings
}

func (o *loopOptions) validate(scanInterval time.Duration) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{flagEventBatchIdle, o.eventBatchIdle}, {flagEventBatchMax, o.eventBatchMax}} {
		switch {
		case f.d < 0:
			return fmt.Errorf("--%s must be >= 0, got %s", f.name, f.d)
		case f.d > scanInterval:
			return fmt.Errorf("--%s %s is longer than --scan-interval %s: the scan interval starts a loop before a batch of events would; "+
				"lower it or raise --scan-interval", f.name, f.d, scanInterval)
		}
	}
	return nil
}

// trigger is the loop's trigger configuration.
func (o *options) trigger() looptrigger.Config {
	return looptrigger.Config{ScanInterval: o.scanInterval, FrequentLoops: o.frequentLoops,
		BatchIdle: o.eventBatchIdle, BatchMax: o.eventBatchMax, EarlyStart: o.eventBatchEarly}
}
