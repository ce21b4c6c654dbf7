package app

import (
	"testing"

	"github.com/spf13/pflag"
)

// The status ConfigMap and per-node-group metrics flags have CA's names
// and defaults.
func TestStatusAndMetricsFlagDefaults(t *testing.T) {
	o := &options{}
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.statusConfigMap != "cluster-autoscaler-status" || o.emitPerNodeGroupMetrics {
		t.Errorf("defaults: --status-config-map-name=%q --emit-per-nodegroup-metrics=%v, want CA's cluster-autoscaler-status and false",
			o.statusConfigMap, o.emitPerNodeGroupMetrics)
	}
	if err := fs.Parse([]string{"--emit-per-nodegroup-metrics"}); err != nil || !o.emitPerNodeGroupMetrics {
		t.Errorf("--emit-per-nodegroup-metrics: %v, set = %v", err, o.emitPerNodeGroupMetrics)
	}
}
