// Package live reads cluster state from the API server through informers
// into the same objects the offline planner loads from files, so a live
// cluster and its dump plan alike: draxr simulate --kubeconfig and --watch
// read it this way, and so does the fidelity test.
package live
