// Package kueue pins Kueue's controller manager (sigs.k8s.io/kueue, the
// tool in go.mod) at Kueue's own dependency versions: it is built from
// this module (make kueue), not from draxr's, whose Kubernetes libraries
// are newer than Kueue's. The end-to-end tests run the binary against
// their control plane.
package kueue
