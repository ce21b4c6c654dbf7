// Package soak runs draxr-autoscaler for a long while on a real control
// plane (etcd, kube-apiserver, kube-controller-manager, draxr-scheduler)
// under seeded random churn and faults, with the checker of
// test/soak/checker judging everything the API server saw. make soak runs
// it (SOAK_DURATION, 30m by default; SOAK_SEED).
//
// The nodes come from a nodeBackend: today the local provider, which
// creates Node objects and makes them Ready itself; a kwok-based backend
// can take its place without touching the churn, the faults or the
// checker.
package soak
