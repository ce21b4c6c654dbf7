package placement

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"draxr.dev/draxr/scheduler/aliases"
	"draxr.dev/draxr/simulator/snapshot"
)

// NoRoom returns a test, costing a few comparisons per node, that is true
// only for nodes whose free pod slots, CPU, memory or ephemeral storage
// are short of the pod's requests (nodes the profile's NodeResourcesFit
// Filter rejects), or, for a pod that needs a new device, whose devices
// are all allocated (see noFreeDevice). It lets a caller scanning many
// nodes skip a full PreFilter and Filter on nodes that are plainly full.
// It returns nil when the test would not be exact: the profile does not
// filter with NodeResourcesFit, or the pod has pod-level resources (whose
// use depends on a feature gate the plugin reads).
func (eng *Engine) NoRoom(pod *v1.Pod) func(nodeName string) bool {
	milliCPU, memory, ok := eng.RoomNeeded(pod)
	if !ok {
		return nil
	}
	req := eng.requestsOf(pod)
	storage := req.StorageEphemeral().Value()
	noDevice := eng.noFreeDevice(pod, extendedRequests(req))
	return func(nodeName string) bool {
		ni := eng.snap.NodeInfo(nodeName)
		if ni == nil {
			return false
		}
		alloc, used := ni.Allocatable, ni.Requested
		full := len(ni.Pods)+1 > alloc.AllowedPodNumber ||
			milliCPU > 0 && milliCPU > alloc.MilliCPU-used.MilliCPU ||
			memory > 0 && memory > alloc.Memory-used.Memory ||
			storage > 0 && storage > alloc.EphemeralStorage-used.EphemeralStorage ||
			noDevice != nil && noDevice(nodeName)
		if full && eng.verify {
			eng.VerifyRejects("NoRoom", pod, nodeName)
		}
		return full
	}
}

// RoomNeeded is the free CPU (millicores) and memory (bytes) a node must
// have, with a free pod slot, for NoRoom not to rule it out; ok is false
// where NoRoom is nil. A caller may skip nodes short of it without
// asking NoRoom node by node.
func (eng *Engine) RoomNeeded(pod *v1.Pod) (milliCPU, memory int64, ok bool) {
	if pod.Spec.Resources != nil || !eng.filtersOnResources() {
		return 0, 0, false
	}
	req := eng.requestsOf(pod)
	return req.Cpu().MilliValue(), req.Memory().Value(), true
}

// requestsOf is the pod's requests as NodeResourcesFit computes them for a
// pod not yet scheduled, once per pod: a pod is tried on the nodes of
// hundreds of groups' templates, and summing them is most of what NoRoom
// allocates. Pods are never changed once handed to the engine.
func (eng *Engine) requestsOf(pod *v1.Pod) v1.ResourceList {
	if req, ok := eng.requests[pod]; ok {
		return req
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true})
	if eng.requests == nil || len(eng.requests) >= 1<<16 {
		eng.requests = map[*v1.Pod]v1.ResourceList{}
	}
	eng.requests[pod] = req
	return req
}

// filtersOnResources reports whether NodeResourcesFit (under its upstream
// or draxr name) is one of the profile's Filter plugins.
func (eng *Engine) filtersOnResources() bool {
	return eng.filtersWith(names.NodeResourcesFit, &eng.resourceFilter)
}

// filtersWith reports, once for the placement engine (cached in *memo), whether
// the plugin (under its upstream or draxr name) is one of the profile's
// Filter plugins.
func (eng *Engine) filtersWith(plugin string, memo **bool) bool {
	if *memo == nil {
		on := false
		alias := aliases.Names()[plugin]
		for _, p := range eng.fw.ListPlugins().Filter.Enabled {
			if p.Name == plugin || p.Name == alias {
				on = true
			}
		}
		*memo = &on
	}
	return **memo
}

// SpreadsByDefault reports whether the profile's PodTopologySpread filters
// pods by default constraints of its own (defaultingType List with a
// DoNotSchedule constraint): such constraints select pods by their owner's
// labels, so pods alike but for their owner can get different verdicts.
// kube-scheduler's System defaults are ScheduleAnyway: they only score.
func (eng *Engine) SpreadsByDefault() bool {
	enabled := false
	for _, p := range eng.fw.ListPlugins().Filter.Enabled {
		enabled = enabled || p.Name == names.PodTopologySpread
	}
	if !enabled {
		return false
	}
	for _, pc := range eng.profile.PluginConfig {
		if pc.Name != names.PodTopologySpread {
			continue
		}
		args, ok := pc.Args.(*config.PodTopologySpreadArgs)
		if !ok {
			return true // unknown args: assume the worst
		}
		if args.DefaultingType != config.ListDefaulting {
			return false
		}
		for _, c := range args.DefaultConstraints {
			if c.WhenUnsatisfiable == v1.DoNotSchedule {
				return true
			}
		}
	}
	return false
}

// Candidates narrows a list of nodes, kind of pod by kind, to those NoRoom
// leaves. While pods are being placed nodes only fill up, so a node
// NoRoom ruled out for a kind stays out, and the next pod of the kind
// looks only at the nodes given a pod since, not at the whole fleet. Use
// it for one run of placements with no removals in between (a removal or
// revert, which the snapshot's change log shows, starts the kind afresh).
type Candidates struct {
	eng  *Engine
	left map[string]*nodesLeft
}

// nodesLeft is a kind's nodes NoRoom left, as of the change log's mark.
type nodesLeft struct {
	nodes []string
	mark  snapshot.LogMark
}

// NewCandidates starts a run of placements.
func (eng *Engine) NewCandidates() *Candidates {
	eng.snap.LogAdditions()
	return &Candidates{eng: eng, left: map[string]*nodesLeft{}}
}

// For returns the nodes of nodes (the same list every call) NoRoom leaves
// for pod, of the given kind; nodes itself when NoRoom cannot tell. The
// list returned must not be changed.
func (c *Candidates) For(pod *v1.Pod, kind string, nodes []string) []string {
	full := c.eng.NoRoom(pod)
	if full == nil {
		return nodes
	}
	l, ok := c.left[kind]
	if !ok {
		l = &nodesLeft{}
		c.left[kind] = l
	}
	added, since := c.eng.snap.AddedSince(l.mark)
	l.mark = c.eng.snap.Mark()
	if !ok || !since {
		l.nodes = slices.DeleteFunc(slices.Clone(nodes), full)
		return l.nodes
	}
	if len(added.Pods) == 0 {
		return l.nodes
	}
	filled, anyFilled := map[string]bool{}, false // nodes given a pod: NoRoom rules them out now
	for _, p := range added.Pods {
		n := p.Node.Node().Name
		if _, seen := filled[n]; !seen {
			filled[n] = full(n)
			anyFilled = anyFilled || filled[n]
		}
	}
	if anyFilled {
		l.nodes = slices.DeleteFunc(slices.Clone(l.nodes), func(n string) bool { return filled[n] })
	}
	return l.nodes
}

// AddsNodeAffinity reports whether the profile's NodeAffinity plugin adds
// node affinity of its own (addedAffinity): every pod then reads labels
// the pods do not name.
func (h *Engine) AddsNodeAffinity() bool {
	for _, pc := range h.profile.PluginConfig {
		if pc.Name != names.NodeAffinity {
			continue
		}
		args, ok := pc.Args.(*config.NodeAffinityArgs)
		if !ok || args.AddedAffinity != nil {
			return true
		}
	}
	return false
}
