// Package view is draxr's one view of the cluster: View holds a lister
// for every kind a reader needs (the planner, the autoscaler's loop and
// its providers, the batch steps), filled by informers on a live cluster
// (autoscaler/liveview: the loop, draxr simulate --kubeconfig and
// --watch, the fidelity test) or from objects read from files, with no
// API server (FromObjects). View.Objects turns either into the objects
// the planner takes, so a live cluster and its dump plan alike. It holds
// no client: what reads the API server lives above the engine.
package view
