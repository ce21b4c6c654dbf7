package app

import (
	"github.com/spf13/pflag"

	"draxr.dev/draxr/simulator/limits"
)

// limitOptions are CA's cluster-wide resource limits (--cores-total,
// --memory-total, --gpu-total), --max-nodes-per-scaleup and the balancing
// of similar node groups. The flags are defined and parsed in
// simulator/limits, shared with draxr simulate.
type limitOptions struct {
	limitFlags limits.Flags
	// limits is what validate parsed.
	limits limits.Options
}

func (o *limitOptions) addFlags(fs *pflag.FlagSet) { o.limitFlags.AddFlags(fs) }

func (o *limitOptions) validate() error {
	var err error
	o.limits, err = o.limitFlags.Options()
	return err
}
