package scaleup

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"draxr.dev/draxr/simulator/dynres"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/placement"
)

// explain says, per node group, why a pending pod does not trigger a
// scale-up, in terms a person can act on.
func (st *state) explain(pod *v1.Pod) NoScaleUp {
	out := NoScaleUp{Pod: RefOf(pod)}
	kind := st.kinds.Of(pod)
	for _, g := range st.groups {
		if ferr := st.rejects[g.Name][kind]; ferr != nil && ferr.Never() {
			out.Code, out.Reason = NeverSchedulable, neverReason(ferr)
			return out
		}
	}
	for _, g := range st.groups {
		out.NodeGroups = append(out.NodeGroups, st.groupReason(g, pod, kind))
	}
	out.Code, out.Reason = reasonOf(out.NodeGroups)
	return out
}

func neverReason(ferr *placement.FitError) string {
	for _, r := range ferr.Reasons() {
		if r.Never {
			return r.Message
		}
	}
	return "cannot be placed: " + ferr.Error()
}

// groupReason says why one node group does not take the pod.
func (st *state) groupReason(g *nodegroup.NodeGroup, pod *v1.Pod, kind string) GroupReason {
	reason := func(code ReasonCode, msg string) GroupReason {
		return GroupReason{NodeGroup: g.Name, Code: code, Message: msg}
	}
	prefix := "node group " + g.Name + ": "
	if ferr := st.rejects[g.Name][kind]; ferr != nil {
		// A used-up shared pool is the answer whatever the node offers.
		if pools := st.exhaustedSharedPools(pod); len(pools) > 0 {
			return reason(SharedPoolExhausted, prefix+strings.Join(pools, "; "))
		}
		if why := st.resourceShortfall(g, pod); why != "" {
			return reason(InsufficientResource, prefix+why)
		}
		if why := st.claimReason(g, pod, kind); why != "" {
			return reason(PredicatesFailed, prefix+why+" (scheduler: "+pluginReasons(ferr)+")")
		}
		return reason(PredicatesFailed, prefix+pluginReasons(ferr))
	}
	if st.p.MaxNodesTotal > 0 && st.p.Engine.Snapshot().NodeCount() >= st.p.MaxNodesTotal {
		return reason(MaxNodesTotalReached, prefix+fmt.Sprintf("--max-nodes-total %d reached", st.p.MaxNodesTotal))
	}
	if st.sizeRoom(g) <= 0 {
		return reason(MaxSizeReached, fmt.Sprintf("node group %s is at max size %d", g.Name, g.Spec.MaxSize))
	}
	if why := st.limitReached(g); why != "" {
		return reason(ResourceLimitReached, prefix+why)
	}
	if st.held[g.Name][kind] {
		return reason(IdleDevicesAvoided, prefix+"not opening a node whose devices would sit idle for a pod that uses none; groups without devices take such pods")
	}
	return reason(NotChosen, prefix+"would fit a new node, but the expander chose other groups until none could help")
}

// resourceShortfall names the first resource the pod needs more of than an
// empty node of the group has, e.g. "needs 9 example.com/gpu; a gpu-dra
// node offers 8".
func (st *state) resourceShortfall(g *nodegroup.NodeGroup, pod *v1.Pod) string {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	names := make([]string, 0, len(req))
	for n := range req {
		names = append(names, string(n))
	}
	sort.Strings(names)
	entries := st.template[g.Name]
	alloc := g.Spec.Template.Status.Allocatable
	if len(alloc) == 0 {
		alloc = g.Spec.Template.Status.Capacity
	}
	for _, n := range names {
		name := v1.ResourceName(n)
		want := req[name]
		if want.IsZero() {
			continue
		}
		if dynres.IsExtended(name) {
			e, ok := dynres.Lookup(entries, name)
			if !ok {
				return fmt.Sprintf("needs %s %s; a %s node offers none", want.String(), name, g.Name)
			}
			if e.Offered < want.Value() {
				return fmt.Sprintf("needs %s %s; a %s node offers %d", want.String(), name, g.Name, e.Offered)
			}
			continue
		}
		have, ok := alloc[name]
		if !ok {
			have = resource.Quantity{}
		}
		if want.Cmp(have) > 0 {
			return fmt.Sprintf("needs %s %s; a %s node has %s allocatable", want.String(), name, g.Name, have.String())
		}
	}
	return ""
}

func pluginReasons(ferr *placement.FitError) string {
	seen := map[string]bool{}
	var parts []string
	for _, r := range ferr.Reasons() {
		if !seen[r.Message] {
			seen[r.Message] = true
			parts = append(parts, r.Message)
		}
	}
	if len(parts) == 0 {
		return ferr.Error()
	}
	return strings.Join(parts, ", ")
}

// claimReason names the request or constraint of the pod's claims (its
// own, or the one the scheduler makes for its DRA-backed extended
// resources) that an empty node of the group can never satisfy, where the
// allocator only says it cannot allocate them. Pods of one kind ask
// alike, so it is worked out once per group and kind.
func (st *state) claimReason(g *nodegroup.NodeGroup, pod *v1.Pod, kind string) string {
	if len(g.Spec.ResourceSlices) == 0 {
		return ""
	}
	if why, ok := st.claimWhy[g.Name][kind]; ok {
		return why
	}
	why := st.workOutClaimReason(g, pod)
	if st.claimWhy[g.Name] == nil {
		st.claimWhy[g.Name] = map[string]string{}
	}
	st.claimWhy[g.Name][kind] = why
	return why
}

func (st *state) workOutClaimReason(g *nodegroup.NodeGroup, pod *v1.Pod) string {
	snap := st.p.Engine.Snapshot()
	idx := snap.Classes()
	class := func(name string) *resourceapi.DeviceClass {
		c, err := idx.Get(name)
		if err != nil {
			return nil
		}
		return c
	}
	for i := range pod.Spec.ResourceClaims {
		rc := &pod.Spec.ResourceClaims[i]
		var spec *resourceapi.ResourceClaimSpec
		switch {
		case rc.ResourceClaimName != nil:
			if c := snap.ResourceClaim(pod.Namespace, *rc.ResourceClaimName); c != nil && c.Status.Allocation == nil {
				spec = &c.Spec
			}
		case rc.ResourceClaimTemplateName != nil:
			if t := snap.ResourceClaimTemplate(pod.Namespace, *rc.ResourceClaimTemplateName); t != nil {
				spec = &t.Spec.Spec
			}
		}
		if spec == nil {
			continue
		}
		if why := st.p.Matcher.WhyNot(spec, class, g.Spec.ResourceSlices); why != "" {
			return "claim " + rc.Name + ": " + why
		}
	}
	// The claim the scheduler makes for DRA-backed extended resources:
	// one request per resource name, as many devices as asked.
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	names := make([]string, 0, len(req))
	for n := range req {
		names = append(names, string(n))
	}
	sort.Strings(names)
	var spec resourceapi.ResourceClaimSpec
	for _, n := range names {
		name := v1.ResourceName(n)
		if !dynres.IsExtended(name) {
			continue
		}
		c := idx.GetDeviceClass(name)
		if c == nil {
			continue
		}
		q := req[name]
		spec.Devices.Requests = append(spec.Devices.Requests, resourceapi.DeviceRequest{Name: n, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: c.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: q.Value()}})
	}
	if len(spec.Devices.Requests) > 0 {
		if why := st.p.Matcher.WhyNot(&spec, class, g.Spec.ResourceSlices); why != "" {
			return "extended resources: " + why
		}
	}
	return ""
}
