// Package schedulerperf compares draxr-scheduler's throughput with the
// stock kube-scheduler on upstream scheduler_perf's DRA extended-resource
// workloads (k8s.io/kubernetes test/integration/scheduler_perf/dra/
// extendedresource). Its benchmark is built only with the schedulerperf
// build tag and runs from `make scheduler-perf`: it takes many minutes and
// starts its own etcd and API server for every workload, so it stays out
// of `make test`.
package schedulerperf
