// Package view is draxr's one view of the cluster: View holds a lister
// for every kind a reader needs (the planner, the autoscaler's loop and
// its providers, the batch steps), built from informers (the loop, draxr
// simulate --kubeconfig and --watch, the fidelity test) or from objects
// read from files, with no API server (FromObjects). View.Objects turns
// either into the objects the planner takes, so a live cluster and its
// dump plan alike.
package view
