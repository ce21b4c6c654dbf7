package snapshot

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// dump renders what the scheduler framework and the placement engine can read from
// a snapshot, so that two equal snapshots print the same.
func dump(t *testing.T, s *Snapshot) string {
	t.Helper()
	var b strings.Builder
	listed, _ := s.NodeInfos().List()
	if len(listed) != s.NodeCount() {
		t.Errorf("lister lists %d nodes, snapshot has %d", len(listed), s.NodeCount())
	}
	// The cached affinity lists are what a rebuild would list.
	affinity, _ := s.NodeInfos().HavePodsWithAffinityList()
	anti, _ := s.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	var wantAffinity, wantAnti []string
	for _, name := range s.NodeNames() {
		if len(s.NodeInfo(name).PodsWithAffinity) > 0 {
			wantAffinity = append(wantAffinity, name)
		}
		if len(s.NodeInfo(name).PodsWithRequiredAntiAffinity) > 0 {
			wantAnti = append(wantAnti, name)
		}
	}
	for _, l := range []struct {
		name string
		got  []fwk.NodeInfo
		want []string
	}{{"affinity", affinity, wantAffinity}, {"anti-affinity", anti, wantAnti}} {
		var got []string
		for _, ni := range l.got {
			got = append(got, ni.Node().Name)
		}
		if !slices.Equal(got, l.want) {
			t.Errorf("%s list %v, want %v", l.name, got, l.want)
		}
	}
	for i, name := range s.NodeNames() {
		ni := s.NodeInfo(name)
		if i < len(listed) && listed[i] != ni {
			t.Errorf("lister returns a stale NodeInfo for %s", name)
		}
		var pods []string
		for _, p := range ni.Pods {
			pods = append(pods, p.GetPod().Name)
			if _, node, ok := s.Pod(p.GetPod().UID); !ok || node != name {
				t.Errorf("pod %s on %s: index says %q, %v", p.GetPod().Name, name, node, ok)
			}
		}
		var sliceNames []string
		for _, sl := range s.SlicesForNode(name) {
			sliceNames = append(sliceNames, sl.Name)
		}
		slices.Sort(sliceNames)
		fmt.Fprintf(&b, "node %s: pods %v requested %d/%d/%v nonzero %d/%d slices %v\n", name, pods,
			ni.Requested.MilliCPU, ni.Requested.Memory, ni.Requested.ScalarResources,
			ni.NonZeroRequested.MilliCPU, ni.NonZeroRequested.Memory, sliceNames)
	}
	var all []string
	for _, sl := range s.AllResourceSlices() {
		all = append(all, sl.Name)
	}
	fmt.Fprintf(&b, "slices %v\n", all)
	for _, c := range s.AllResourceClaims() {
		fmt.Fprintf(&b, "claim %s/%s uid %s allocated %v\n", c.Namespace, c.Name, c.UID, c.Status.Allocation != nil)
	}
	tracked, _ := s.ResourceClaims().List()
	fmt.Fprintf(&b, "tracker lists %d claims\n", len(tracked))
	var ids []string
	for id := range s.AllocatedDeviceIDs() {
		ids = append(ids, id.String())
	}
	slices.Sort(ids)
	fmt.Fprintf(&b, "devices %v\n", ids)
	classes, _ := s.DeviceClasses().List()
	for _, c := range classes {
		fmt.Fprintf(&b, "class %s: %v\n", c.Name, s.Classes().ResourceNames(c.Name))
	}
	if c := s.DeviceClassResolver().GetDeviceClass(fx.GPUResource); c != nil {
		fmt.Fprintf(&b, "%s -> %s\n", fx.GPUResource, c.Name)
	}
	fmt.Fprintf(&b, "template %v\n", s.ResourceClaimTemplate("default", "t") != nil)
	fmt.Fprintf(&b, "pvc used %v\n", s.StorageInfos().IsPVCUsedByPods("default/data"))
	return b.String()
}

// allocatedClaim holds the named devices of node-0's GPU pool.
func allocatedClaim(name string, devices ...string) *resourceapi.ResourceClaim {
	c := fx.Claim(name, "gpu", int64(len(devices)))
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "devices", Driver: fx.Driver, Pool: "node-0", Device: d})
	}
	return c
}

func boundPod(name, node string, gpus int64) *v1.Pod {
	p := fx.Pod(name, 100, fx.GPUs(fx.GPUResource, gpus))
	p.Spec.NodeName = node
	return p
}

func withPVC(p *v1.Pod) *v1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data",
		VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	return p
}

// base is two nodes with slices, a class, two running pods and one
// allocated claim.
func base(t *testing.T) *Snapshot {
	s := New()
	s.SetDeviceClass(fx.Class("gpu", fx.Driver, fx.GPUResource, fx.Epoch))
	for _, n := range []string{"node-0", "node-1"} {
		must(t, s.AddNode(fx.Node(n, 8, 32, nil)))
		must(t, s.AddResourceSlice(fx.GPUSlice(n, 4)))
	}
	must(t, s.AddPod(boundPod("a", "node-0", 1)))
	must(t, s.AddPod(boundPod("b", "node-0", 0)))
	must(t, s.AddPod(boundPod("c", "node-0", 2)))
	s.SetResourceClaim(allocatedClaim("held", "gpu-0"))
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotForkRevert(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, s *Snapshot)
	}{
		{"add pods", func(t *testing.T, s *Snapshot) {
			must(t, s.AddPod(boundPod("x", "node-1", 1)))
			must(t, s.AddPod(withPVC(boundPod("y", "node-0", 3))))
		}},
		{"remove pods", func(t *testing.T, s *Snapshot) {
			must(t, s.RemovePod(fx.Pod("a", 0, nil).UID))
			must(t, s.RemovePod(fx.Pod("c", 0, nil).UID))
		}},
		{"add a pod, then remove another from the same node", func(t *testing.T, s *Snapshot) {
			must(t, s.AddPod(boundPod("x", "node-0", 1)))
			must(t, s.RemovePod(fx.Pod("a", 0, nil).UID))
			must(t, s.AddPod(boundPod("y", "node-0", 1)))
		}},
		{"remove a pod and add it back", func(t *testing.T, s *Snapshot) {
			must(t, s.RemovePod(fx.Pod("a", 0, nil).UID))
			must(t, s.AddPod(boundPod("a", "node-0", 1)))
		}},
		{"add and remove nodes", func(t *testing.T, s *Snapshot) {
			must(t, s.AddNode(fx.Node("node-2", 8, 32, nil)))
			must(t, s.AddResourceSlice(fx.GPUSlice("node-2", 4)))
			must(t, s.AddPod(boundPod("x", "node-2", 1)))
			must(t, s.AddPod(boundPod("y", "node-0", 1)))
			must(t, s.RemoveNode("node-0"))
			must(t, s.RemoveNode("node-2"))
		}},
		{"pods with affinity, and their node removed with the lists cached", func(t *testing.T, s *Snapshot) {
			term := []v1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}
			x, y := boundPod("x", "node-1", 0), boundPod("y", "node-0", 0)
			x.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}
			y.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}
			must(t, s.AddPod(x))
			must(t, s.AddPod(y))
			_, _ = s.NodeInfos().List()
			_, _ = s.NodeInfos().HavePodsWithAffinityList()
			_, _ = s.NodeInfos().HavePodsWithRequiredAntiAffinityList()
			must(t, s.RemovePod(fx.Pod("a", 0, nil).UID))
			must(t, s.RemoveNode("node-0"))
		}},
		{"add a node with the lists cached", func(t *testing.T, s *Snapshot) {
			_, _ = s.NodeInfos().List()
			must(t, s.AddNode(fx.Node("node-2", 8, 32, nil)))
			must(t, s.AddPod(boundPod("x", "node-2", 1)))
		}},
		{"slices", func(t *testing.T, s *Snapshot) {
			s.RemoveResourceSlice(fx.GPUSlice("node-0", 4).Name)
			must(t, s.AddResourceSlice(fx.DeviceSlice("node-1", "other.example.com", 2, "x")))
		}},
		{"claims", func(t *testing.T, s *Snapshot) {
			s.DeleteResourceClaim("default", "held")
			s.SetResourceClaim(allocatedClaim("new", "gpu-1", "gpu-2"))
			s.SetResourceClaim(allocatedClaim("new", "gpu-3"))
			s.SetResourceClaim(fx.Claim("unallocated", "gpu", 1))
		}},
		{"classes and templates", func(t *testing.T, s *Snapshot) {
			s.SetDeviceClass(fx.Class("newer", "other.example.com", fx.GPUResource, fx.Epoch.AddDate(0, 0, 1)))
			s.DeleteDeviceClass("gpu")
			s.SetResourceClaimTemplate(fx.ClaimTemplate("t", "gpu", 1))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base(t)
			before := dump(t, s)

			s.Fork()
			tc.change(t, s)
			changed := dump(t, s)
			if changed == before {
				t.Fatal("the change changed nothing")
			}
			s.Revert()
			if got := dump(t, s); got != before {
				t.Errorf("after Revert:\n%s\nwant:\n%s", got, before)
			}

			// Nested: the inner fork's changes, committed, are undone by the outer Revert.
			s.Fork()
			s.Fork()
			tc.change(t, s)
			s.Commit()
			if got := dump(t, s); got != changed {
				t.Errorf("after inner Commit:\n%s\nwant:\n%s", got, changed)
			}
			s.Revert()
			if got := dump(t, s); got != before {
				t.Errorf("after outer Revert:\n%s\nwant:\n%s", got, before)
			}
			if s.ForkDepth() != 0 {
				t.Errorf("fork depth %d", s.ForkDepth())
			}

			// Outermost Commit keeps the changes.
			s.Fork()
			tc.change(t, s)
			s.Commit()
			s.Revert()
			if got := dump(t, s); got != changed {
				t.Errorf("after Commit and a stray Revert:\n%s\nwant:\n%s", got, changed)
			}
		})
	}
}

func TestSnapshotErrors(t *testing.T) {
	s := base(t)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"duplicate node", s.AddNode(fx.Node("node-0", 1, 1, nil)), "node node-0 already exists"},
		{"pod on unknown node", s.AddPod(boundPod("x", "nowhere", 1)), `node "nowhere" not found`},
		{"duplicate pod", s.AddPod(boundPod("a", "node-1", 1)), "is already placed"},
		{"remove unknown pod", s.RemovePod(types.UID("nope")), "is not placed"},
		{"remove unknown node", s.RemoveNode("nowhere"), "node nowhere not found"},
		{"duplicate slice", s.AddResourceSlice(fx.GPUSlice("node-0", 4)), "already exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", tc.err, tc.want)
			}
		})
	}
}

// TestClaimTrackerPending: allocations signalled in Reserve are visible to
// the allocator (List, Get, GatherAllocatedState) until cleared, without
// being committed.
func TestClaimTrackerPending(t *testing.T) {
	s := base(t)
	tracker := s.ResourceClaims()
	unallocated := fx.Claim("pending", "gpu", 1)
	s.SetResourceClaim(unallocated)

	inFlight := allocatedClaim("pending", "gpu-1")
	extended := allocatedClaim("<extended-resources>", "gpu-2")
	extended.UID = "in-memory"
	must(t, tracker.SignalClaimPendingAllocation(unallocated.UID, inFlight))
	must(t, tracker.SignalClaimPendingAllocation(extended.UID, extended))
	if err := tracker.SignalClaimPendingAllocation("x", fx.Claim("x", "gpu", 1)); err == nil {
		t.Error("signalling a claim without allocation succeeded")
	}

	state, err := tracker.GatherAllocatedState()
	must(t, err)
	if got := state.AllocatedDevices.Len(); got != 3 {
		t.Errorf("allocated state with pending has %d devices, want 3", got)
	}
	if got := s.AllocatedDeviceIDs().Len(); got != 1 {
		t.Errorf("committed devices = %d, want 1 (pending ones are not committed)", got)
	}
	listed, _ := tracker.List()
	if len(listed) != 3 {
		t.Errorf("tracker lists %d claims, want 3", len(listed))
	}
	if c, _ := tracker.Get("default", "pending"); c.Status.Allocation == nil {
		t.Error("Get does not return the pending allocation")
	}
	if tracker.GetPendingAllocation(unallocated.UID) == nil {
		t.Error("GetPendingAllocation = nil")
	}
	if !tracker.MaybeRemoveClaimPendingAllocation(extended.UID, false) || tracker.MaybeRemoveClaimPendingAllocation(extended.UID, false) {
		t.Error("MaybeRemoveClaimPendingAllocation does not report removal once")
	}
	s.ClearPendingAllocations()
	state, _ = tracker.GatherAllocatedState()
	if got := state.AllocatedDevices.Len(); got != 1 {
		t.Errorf("after clearing, allocated state has %d devices, want 1", got)
	}
	if c, _ := tracker.Get("default", "pending"); c.Status.Allocation != nil {
		t.Error("after clearing, Get still returns the pending allocation")
	}
}

// A pod placed again after a Revert reuses the requests computed the
// first time only while it asks for the same: a pod of the same UID with
// other requests or other affinity is counted as it is now.
func TestPlacedAgainAfterRevert(t *testing.T) {
	s := New()
	if err := s.AddNode(fx.Node("n", 64, 256, nil)); err != nil {
		t.Fatal(err)
	}
	place := func(milliCPU int64, zoneAffinity bool) {
		t.Helper()
		s.Fork()
		defer s.Revert()
		pod := fx.Pod("p", milliCPU, nil)
		pod.Spec.NodeName = "n"
		if zoneAffinity {
			pod.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				TopologyKey: v1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}}}}}}
		}
		if err := s.AddPod(pod); err != nil {
			t.Fatal(err)
		}
		ni := s.NodeInfo("n")
		if ni.Requested.MilliCPU != milliCPU {
			t.Errorf("node requests %dm CPU for a pod of %dm", ni.Requested.MilliCPU, milliCPU)
		}
		if got := len(ni.PodsWithAffinity) > 0; got != zoneAffinity {
			t.Errorf("pod with affinity: %v, want %v", got, zoneAffinity)
		}
	}
	place(1000, false)
	place(1000, false)
	place(2000, false)
	place(2000, true)
	place(1000, false)
}
