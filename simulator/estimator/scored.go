package estimator

import (
	"k8s.io/apimachinery/pkg/types"

	v1 "k8s.io/api/core/v1"

	"draxr.dev/draxr/simulator/nodegroup"
)

// Scored places pods, in the order given, as the scheduler would with n
// fresh nodes of the group already there: each pod onto the feasible node
// its configured scoring ranks best. Where scoring spreads pods (least
// allocated), partitions of a device land on different nodes and whole
// devices run out sooner than tight packing predicts, so only this says
// whether n nodes are enough. It returns the result and whether every pod
// was placed; the snapshot keeps what was placed either way. It scores
// every pod against every node; Spread gives the same answer at about the
// cost of packing and falls back to it.
func (b *BinPacking) Scored(g *nodegroup.NodeGroup, pods []*v1.Pod, n int) (*Result, bool, error) {
	res := &Result{Group: g.Name, Placed: map[types.UID]string{}}
	for i := 0; i < n; i++ {
		name := b.Namer(g.Name, i)
		if err := b.addNode(g, name); err != nil {
			return nil, false, err
		}
		res.NewNodes = append(res.NewNodes, name)
	}
	all := true
	for _, pod := range pods {
		node, _, ferr := b.Engine.PlaceBest(pod, res.NewNodes)
		if ferr != nil {
			res.Unplaced = append(res.Unplaced, Unplaced{Pod: pod})
			all = false
			continue
		}
		res.Placed[pod.UID] = node
		res.PlacedOrder = append(res.PlacedOrder, pod)
	}
	return res, all, nil
}
