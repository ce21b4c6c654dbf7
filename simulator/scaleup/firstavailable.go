package scaleup

import (
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/placement"
)

// firstAvailableRank is how far down their claims' firstAvailable lists
// (KEP-4816, prioritized lists) the pods of an estimate had to go on the
// group's new nodes: the highest index of a sub-request allocated, 0 when
// every pod got its first choice or none asks for one. One pod of each
// kind is read (pods of a kind ask alike, and the nodes are alike).
func firstAvailableRank(engine *placement.Engine, kinds *estimator.Kinds, res *estimator.Result) int {
	rank := 0
	seen := map[string]bool{}
	for _, pod := range res.PlacedOrder {
		kind := kinds.Of(pod)
		if seen[kind] {
			continue
		}
		placed, _, ok := engine.Snapshot().Pod(pod.UID)
		if !ok {
			continue // counted, not simulated: another pod of its kind was
		}
		seen[kind] = true
		for _, c := range engine.ClaimsOf(placed) {
			if c.Status.Allocation == nil {
				continue
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				request, sub, ok := strings.Cut(r.Request, "/")
				if !ok {
					continue
				}
				for _, req := range c.Spec.Devices.Requests {
					if req.Name != request {
						continue
					}
					i := slices.IndexFunc(req.FirstAvailable, func(s resourceapi.DeviceSubRequest) bool { return s.Name == sub })
					rank = max(rank, i)
				}
			}
		}
	}
	return rank
}

// preferredChoices keeps the options whose pods go least far down their
// firstAvailable lists: a group that gives pods their first choice is
// grown before one that gives only a fallback, whatever the expander
// would rank higher (CA's expanders know nothing of prioritized lists).
// Among those, the expander chooses.
func preferredChoices(options []expander.Option, rank map[string]int) []expander.Option {
	best := -1
	for _, o := range options {
		if r := rank[o.Group]; best < 0 || r < best {
			best = r
		}
	}
	out := options[:0:0]
	for _, o := range options {
		if rank[o.Group] == best {
			out = append(out, o)
		}
	}
	return out
}
