// Package liveview builds draxr's View (simulator/view) from a live
// cluster: informers on a clientset, a dynamic client for the CRDs
// without a clientset, discovery to read only the APIs served (CheckServed),
// and Read and Watch for draxr simulate --kubeconfig and --watch. It sits
// above the engine so that simulator/ holds listers and pure code only,
// with no client that could reach the API server (issue 54).
package liveview
