// Package benchlive measures draxr-autoscaler at fleet size on a real
// control plane, with draxr-scheduler binding the pods and the kwok
// controller (test/kwok) playing every kubelet: a scale-up from zero, a
// steady loop with nothing to do, a scale-down with drains, and how soon
// a pending pod gets its node with and without frequent loops. Each
// benchmark prints one summary line ("bench-live ..."). The benchmarks are
// built only with the benchlive build tag and run from `make bench-live`
// (BENCH_LIVE_NODES and BENCH_LIVE_SCALEDOWN_NODES make them smaller):
// they take many minutes, so they stay out of `make test`.
//
// API requests are counted from the API server's audit log, which
// records the autoscaler's ServiceAccount alone; loops and their wall
// time from the autoscaler's cluster_autoscaler_function_duration_seconds
// {function="main"}; CPU and peak RSS from /proc.
package benchlive
