package scaleup

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"draxr.dev/draxr/simulator/estimator"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/nodegroup"
)

// CA's tolerances for similar node groups (config.NodeGroupDifferenceRatios
// defaults): allocatable may differ by 5%, memory capacity by 1.5%; other
// capacities must match exactly.
const (
	maxAllocatableDifferenceRatio    = 0.05
	maxCapacityMemoryDifferenceRatio = 0.015
)

// basicIgnoredLabels are the labels CA never compares between similar
// groups (its BasicIgnoredLabels: hostname, zone, region and a few
// provider ones), plus draxr's group label, which always differs.
func basicIgnoredLabels() map[string]bool {
	return map[string]bool{
		v1.LabelHostname: true, v1.LabelFailureDomainBetaZone: true, v1.LabelFailureDomainBetaRegion: true,
		v1.LabelTopologyZone: true, v1.LabelTopologyRegion: true,
		"beta.kubernetes.io/fluentd-ds-ready": true, "kops.k8s.io/instancegroup": true,
		"worker.gardener.cloud/kubernetes-version": true,
		"topology.ebs.csi.aws.com/zone":            true, "topology.gke.io/zone": true, "topology.disk.csi.azure.com/zone": true,
		nodegroup.GroupLabel: true,
	}
}

// scaleUpStep is one loop's scale-up for the chosen group. Without
// similar groups it is the group's estimate. With
// --balance-similar-node-groups, the nodes the chosen group would add are
// split across it and the similar groups that take the same pods,
// smallest group first as CA does, and each group's share is estimated in
// turn. Planned node counts are updated as each share is committed.
func (st *state) scaleUpStep(ctx context.Context, option expander.Option, pods []*v1.Pod) ([]*estimator.Result, error) {
	best := option.Group
	scored := withinScoredBudget(option)
	similar := st.similarGroups(best, pods)
	if len(similar) == 0 {
		res, err := st.finalEstimate(ctx, best, pods, scored)
		if err != nil {
			return nil, err
		}
		st.planned[best] += len(res.NewNodes)
		return []*estimator.Result{res}, nil
	}
	snap := st.p.Engine.Snapshot()
	snap.Fork()
	probe, err := st.finalEstimate(ctx, best, pods, scored)
	snap.Revert()
	if err != nil {
		return nil, err
	}
	targets := append([]string{best}, similar...)
	shares := st.balance(targets, len(probe.NewNodes))
	var out []*estimator.Result
	for _, g := range targets {
		if shares[g] == 0 || len(pods) == 0 {
			continue
		}
		st.stepCap = map[string]int{g: shares[g]}
		res, err := st.finalEstimate(ctx, g, pods, scored)
		st.stepCap = nil
		if err != nil {
			return nil, err
		}
		if len(res.NewNodes) == 0 {
			continue
		}
		st.planned[g] += len(res.NewNodes)
		pods = withoutPlaced(pods, res.Placed)
		out = append(out, res)
	}
	return out, nil
}

// balance splits n new nodes across groups as CA's balancing processor
// does: each node goes to the group that is smallest (live, upcoming and
// planned nodes) among those with room; ties go to the earlier group, the
// chosen one first.
func (st *state) balance(groups []string, n int) map[string]int {
	shares := map[string]int{}
	room := map[string]int{}
	for _, g := range groups {
		room[g] = st.room(st.byName[g])
	}
	for ; n > 0; n-- {
		pick := ""
		for _, g := range groups {
			if shares[g] >= room[g] {
				continue
			}
			size := st.current[g] + st.planned[g] + shares[g]
			if pick == "" || size < st.current[pick]+st.planned[pick]+shares[pick] {
				pick = g
			}
		}
		if pick == "" {
			break
		}
		shares[pick]++
	}
	return shares
}

// similarGroups lists, sorted by name, the groups similar to best with
// room that take every kind of pod best takes (CA's
// ComputeSimilarNodeGroups). Nil unless balancing is on.
func (st *state) similarGroups(best string, pods []*v1.Pod) []string {
	b := st.p.Limits.Balancing
	if !b.Enabled {
		return nil
	}
	var kinds []string
	for _, pod := range pods {
		k := st.kinds.Of(pod)
		if st.rejects[best][k] == nil && !st.held[best][k] && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	ignored := basicIgnoredLabels()
	for _, l := range b.IgnoreLabels {
		ignored[l] = true
	}
	var out []string
	for _, g := range st.groups {
		if g.Name == best || st.room(g) <= 0 {
			continue
		}
		takesAll := true
		for _, k := range kinds {
			if st.rejects[g.Name][k] != nil || st.held[g.Name][k] {
				takesAll = false
				break
			}
		}
		if !takesAll {
			continue
		}
		if len(b.Labels) > 0 {
			if sameLabels(st.byName[best], g, b.Labels) {
				out = append(out, g.Name)
			}
			continue
		}
		if similarTemplates(st.byName[best], g, ignored) {
			out = append(out, g.Name)
		}
	}
	sort.Strings(out)
	return out
}

// sameLabels is CA's --balancing-label comparison: every label is set on
// both templates, to the same value.
func sameLabels(a, b *nodegroup.NodeGroup, labels []string) bool {
	for _, l := range labels {
		va, ok := a.Spec.Template.Labels[l]
		if !ok {
			return false
		}
		if vb, ok := b.Spec.Template.Labels[l]; !ok || va != vb {
			return false
		}
	}
	return true
}

// similarTemplates is CA's generic comparison of two groups' template
// nodes (the same capacities, memory within 1.5%, allocatable within 5%,
// the same labels but the ignored ones) plus draxr's: the same devices
// in the template ResourceSlices, since the devices are what DRA pods
// take. Free resources are not compared: templates run no pods.
func similarTemplates(a, b *nodegroup.NodeGroup, ignored map[string]bool) bool {
	na, _ := a.NewNode("compare")
	nb, _ := b.NewNode("compare")
	if len(na.Status.Capacity) != len(nb.Status.Capacity) {
		return false
	}
	for name, qa := range na.Status.Capacity {
		qb, ok := nb.Status.Capacity[name]
		if !ok {
			return false
		}
		if name == v1.ResourceMemory {
			if !withinTolerance(qa, qb, maxCapacityMemoryDifferenceRatio) {
				return false
			}
		} else if qa.Cmp(qb) != 0 {
			return false
		}
	}
	if len(na.Status.Allocatable) != len(nb.Status.Allocatable) {
		return false
	}
	for name, qa := range na.Status.Allocatable {
		qb, ok := nb.Status.Allocatable[name]
		if !ok || !withinTolerance(qa, qb, maxAllocatableDifferenceRatio) {
			return false
		}
	}
	if !labelsMatch(na.Labels, nb.Labels, ignored) || !labelsMatch(nb.Labels, na.Labels, ignored) {
		return false
	}
	return sameDevices(a.Spec.ResourceSlices, b.Spec.ResourceSlices)
}

// withinTolerance is CA's check: the larger minus the smaller is at most
// ratio times the larger.
func withinTolerance(a, b resource.Quantity, ratio float64) bool {
	x, y := float64(a.MilliValue()), float64(b.MilliValue())
	larger, smaller := math.Max(x, y), math.Min(x, y)
	return larger-smaller <= larger*ratio
}

// labelsMatch reports whether every label of a that is not ignored has
// the same value in b.
func labelsMatch(a, b map[string]string, ignored map[string]bool) bool {
	for k, v := range a {
		if ignored[k] {
			continue
		}
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// sameDevices compares what the template slices publish, per driver:
// devices and shared counters, in any slice order.
func sameDevices(a, b []resourceapi.ResourceSliceSpec) bool {
	key := func(specs []resourceapi.ResourceSliceSpec) []string {
		out := make([]string, 0, len(specs))
		for _, s := range specs {
			j, _ := json.Marshal([]any{s.Driver, s.Devices, s.SharedCounters})
			out = append(out, string(j))
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
