// Package metrics defines draxr-autoscaler's Prometheus metrics.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "draxr_autoscaler"

var (
	// ScaleUps counts nodes added, per node group.
	ScaleUps = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "scaled_up_nodes_total", Help: "Nodes added by scale-up, per node group.",
		StabilityLevel: metrics.ALPHA}, []string{"node_group"})
	// ScaleDowns counts nodes removed, per node group.
	ScaleDowns = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "scaled_down_nodes_total", Help: "Nodes removed by scale-down, per node group.",
		StabilityLevel: metrics.ALPHA}, []string{"node_group"})
	// FailedScaleUps counts node-group backoffs by CA's reason code
	// (cloudProviderError, timeout, or the provider's instance error code).
	FailedScaleUps = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "failed_scale_ups_total", Help: "Failed scale-ups (node group backed off), by reason.",
		StabilityLevel: metrics.ALPHA}, []string{"reason"})
	// UnschedulablePods is the number of pods the scheduler gave up on.
	UnschedulablePods = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: subsystem, Name: "unschedulable_pods", Help: "Pods marked unschedulable at the last loop.",
		StabilityLevel: metrics.ALPHA})
	// Errors counts failed operations, by kind.
	Errors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: subsystem, Name: "errors_total", Help: "Errors, by operation.",
		StabilityLevel: metrics.ALPHA}, []string{"operation"})
	// LoopDuration and SimulationDuration time each loop and its planning.
	LoopDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "loop_duration_seconds", Help: "Duration of one autoscaler loop.",
		Buckets: metrics.ExponentialBuckets(0.001, 2, 16), StabilityLevel: metrics.ALPHA})
	SimulationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: subsystem, Name: "simulation_duration_seconds", Help: "Duration of scale-up and scale-down simulations.",
		Buckets: metrics.ExponentialBuckets(0.001, 2, 16), StabilityLevel: metrics.ALPHA}, []string{"kind"})
)

var once sync.Once

// Register registers the metrics with the legacy registry (served on
// /metrics); it is safe to call more than once.
func Register() {
	once.Do(func() {
		legacyregistry.MustRegister(ScaleUps, ScaleDowns, FailedScaleUps, UnschedulablePods, Errors, LoopDuration, SimulationDuration)
	})
}
