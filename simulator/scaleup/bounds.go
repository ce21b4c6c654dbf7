package scaleup

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/snapshot"
)

// wasteBound tells, while a group is being estimated, that its new nodes
// can no longer waste as little as the best option found so far: then
// least-waste would never choose it, and the rest of the estimate is not
// worth its cost. With hundreds of groups of one shape in many sizes
// (an instance type each), most are plainly too large after a node or
// two.
//
// The bound: every new node of a group has the template's allocatable,
// so the mean waste over N nodes is 1 - mean over CPU and memory of
// (requested on all of them)/(N x allocatable). What the new nodes hold
// is at most every pod given plus, per node, every DaemonSet's pod; so
// with N nodes opened so far, and more only lowering each node's share,
// the waste is at least 1 - mean of min(1, pods/(N x alloc) + daemons/alloc).
// It holds only where waste reads CPU and memory alone: no pod uses
// devices or pod-level resources, and the group's nodes have no devices.
type wasteBound struct {
	ok            bool
	pods, daemons estimator.Usage
}

// newWasteBound is the bound for these pods, or one that never gives up
// (ok false) when the pods read more than CPU and memory.
func newWasteBound(pods []*v1.Pod, daemonSets []*appsv1.DaemonSet) wasteBound {
	w := wasteBound{ok: true}
	for _, pod := range pods {
		if pod.Spec.Resources != nil || !usesNoDevices(pod) {
			return wasteBound{}
		}
		w.pods = w.pods.Plus(requestsOf(pod))
	}
	for _, ds := range daemonSets {
		w.daemons = w.daemons.Plus(requestsOf(&v1.Pod{Spec: ds.Spec.Template.Spec}))
	}
	return w
}

func requestsOf(pod *v1.Pod) estimator.Usage {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return estimator.Usage{MilliCPU: float64(req.Cpu().MilliValue()), Memory: float64(req.Memory().Value())}
}

// giveUp is the estimator's GiveUp: true once the waste of the nodes
// opened so far is bound to exceed best (beyond least-waste's tie
// margin). nil when the bound does not hold.
func (w wasteBound) giveUp(snap *snapshot.Snapshot, best float64) func(*estimator.Result) bool {
	if !w.ok {
		return nil
	}
	return func(res *estimator.Result) bool {
		if len(res.NewNodes) == 0 || snap.NodeInfo(res.NewNodes[0]) == nil {
			return false
		}
		alloc := estimator.NodeUsage(snap, res.NewNodes[0]).Allocatable
		if alloc.Devices > 0 {
			return false
		}
		return w.least(float64(len(res.NewNodes)), alloc) > best+expander.Tie
	}
}

// least is the bound for n nodes of allocatable alloc, over the
// dimensions waste counts (those the node has).
func (w wasteBound) least(n float64, alloc estimator.Usage) float64 {
	var used, dims float64
	for _, d := range [][3]float64{{w.pods.MilliCPU, w.daemons.MilliCPU, alloc.MilliCPU}, {w.pods.Memory, w.daemons.Memory, alloc.Memory}} {
		if d[2] > 0 {
			used += min(1, d[0]/(n*d[2])+d[1]/d[2])
			dims++
		}
	}
	if dims == 0 {
		return 0
	}
	return 1 - used/dims
}

// optionBound gives up on a group's estimate once the expander in use
// could not choose it over the best option found so far: least-waste by
// wasteBound; price by the cost per pod, which is at least the nodes
// opened so far at the group's price over every pod given (more nodes
// only cost more, and no estimate places more pods than it is given).
// Other expanders (and chains) see every group in full.
type optionBound struct {
	expander string
	waste    wasteBound
	pods     int
}

func newOptionBound(expanderName string, pods []*v1.Pod, daemonSets []*appsv1.DaemonSet) optionBound {
	b := optionBound{expander: expanderName, pods: len(pods)}
	if expanderName == "least-waste" {
		b.waste = newWasteBound(pods, daemonSets)
	}
	return b
}

// bestSoFar is what an option must beat to be chosen: the least waste
// and the least cost per pod of the options the expander will see.
type bestSoFar struct{ waste, costPerPod float64 }

func noBestYet() bestSoFar { return bestSoFar{waste: math.Inf(1), costPerPod: math.Inf(1)} }

// add takes in an option the expander will see.
func (b *bestSoFar) add(o expander.Option) {
	b.waste = min(b.waste, o.Waste)
	if o.PriceKnown {
		b.costPerPod = min(b.costPerPod, expander.CostPerPod(o))
	}
}

// giveUp is the estimator's GiveUp for group, nil when nothing can be
// told yet.
func (b optionBound) giveUp(st *state, snap *snapshot.Snapshot, group string, best bestSoFar) func(*estimator.Result) bool {
	switch b.expander {
	case "least-waste":
		if math.IsInf(best.waste, 1) {
			return nil
		}
		return b.waste.giveUp(snap, best.waste)
	case "price":
		perHour, known := st.nodePrice(group)
		if !known || math.IsInf(best.costPerPod, 1) || b.pods == 0 {
			return nil
		}
		return func(res *estimator.Result) bool {
			return perHour*float64(len(res.NewNodes))/float64(b.pods) > best.costPerPod+expander.Tie
		}
	}
	return nil
}
