package app

import (
	"testing"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/simulator/limits"
)

// draxr-autoscaler takes CA's limit flags with CA's defaults, parsed by
// the same code as draxr simulate.
func TestLimitFlags(t *testing.T) {
	parse := func(args ...string) (*options, error) {
		o := &options{}
		fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(append([]string{"--node-group-config=g.yaml"}, args...)); err != nil {
			t.Fatal(err)
		}
		return o, o.validate()
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if o.limits.Limits.Cores.Max != 320000 || o.limits.Limits.Memory.Max != 6400000*limits.GiB || o.limits.MaxNodesPerScaleUp != 1000 || o.limits.Balancing.Enabled {
		t.Errorf("defaults = %+v, want CA's", o.limits)
	}
	o, err = parse("--cores-total=16:128", "--gpu-total=nvidia.com/gpu:0:16", "--balance-similar-node-groups", "--balancing-label=pool")
	if err != nil {
		t.Fatal(err)
	}
	if o.limits.Limits.Cores != (limits.Range{Min: 16, Max: 128}) || len(o.limits.Limits.GPUs) != 1 || !o.limits.Balancing.Enabled || o.limits.Balancing.Labels[0] != "pool" {
		t.Errorf("options = %+v", o.limits)
	}
	if _, err := parse("--balancing-label=pool", "--balancing-ignore-label=zone"); err == nil {
		t.Error("--balancing-label with --balancing-ignore-label accepted, want an error")
	}
}
