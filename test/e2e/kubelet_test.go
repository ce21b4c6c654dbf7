package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// The node side of KEP-5004 on a real kubelet: in a pod of three
// containers where the first and third ask for one device each, the
// driver prepares the scheduler's extended-resource claim and each of the
// two containers receives the CDI device of its own allocation; the
// middle container receives none.
func TestKubeletGivesEachContainerItsDevice(t *testing.T) {
	e := newKubeletEnv(t, "kubelet")
	e.class("kubelet-gpu", e.driver, e.resource)
	node := e.kubeletNode("kubelet-node", nodeSetup{devices: 3})

	e.createPod("three", nil, []v1.Container{e.container("one", 1), e.container("two", 0), e.container("three", 1)})
	pod := e.waitRunning("three")
	claim := e.claimOf(pod)
	if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" || len(devices(claim)) != 2 {
		t.Fatalf("claim %s: annotations %v, devices %v; want the scheduler's extended-resource claim with 2 devices", claim.Name, claim.Annotations, devices(claim))
	}
	if err := node.checkPrepared(claim); err != nil {
		t.Fatal(err)
	}
	want, got := node.wantCDI(pod, claim), node.gotCDI(pod)
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("CDI devices per container = %v, want %v", got, want)
	}
	if len(got["one"]) != 1 || len(got["three"]) != 1 || got["one"][0] == got["three"][0] || len(got["two"]) != 0 {
		t.Errorf("containers one and three must each get one device of their own, two none: %v", got)
	}
	for name, ids := range got {
		for _, id := range ids {
			if !strings.HasPrefix(id, e.driver+"/"+cdiClass+"=gpu-") {
				t.Errorf("container %s: CDI ID %q, want %s/%s=gpu-<n>", name, id, e.driver, cdiClass)
			}
		}
	}
}

// A non-sidecar init container runs before the main container and
// finishes, so both may use the same device: the claim holds one device
// and both containers receive it.
func TestKubeletInitContainerReusesDevice(t *testing.T) {
	e := newKubeletEnv(t, "kubelet-init")
	e.class("kubelet-init-gpu", e.driver, e.resource)
	node := e.kubeletNode("kubelet-init-node", nodeSetup{devices: 2})

	setup := e.container("setup", 1)
	setup.Command = []string{"true"} // exits at once on the test node's runtime
	e.createPod("init", []v1.Container{setup}, []v1.Container{e.container("main", 1)})
	pod := e.waitRunning("init")
	claim := e.claimOf(pod)
	if err := node.checkPrepared(claim); err != nil {
		t.Fatal(err)
	}
	got := node.gotCDI(pod)
	if len(devices(claim)) != 1 {
		t.Fatalf("claim devices = %v, want one device for both containers", devices(claim))
	}
	if want := []string{node.cdi.ID(claim.Status.Allocation.Devices.Results[0].Device)}; !slices.Equal(got["setup"], want) || !slices.Equal(got["main"], want) {
		t.Errorf("CDI devices per container = %v, want %v for both setup and main", got, want)
	}
}

// Deleting the pod makes the kubelet unprepare the claim: the driver
// forgets it and its CDI spec is removed.
func TestKubeletUnpreparesDeletedPod(t *testing.T) {
	e := newKubeletEnv(t, "kubelet-del")
	e.class("kubelet-del-gpu", e.driver, e.resource)
	node := e.kubeletNode("kubelet-del-node", nodeSetup{devices: 1})

	e.createPod("first", nil, []v1.Container{e.container("main", 1)})
	claim := e.claimOf(e.waitRunning("first"))
	if err := node.checkPrepared(claim); err != nil {
		t.Fatal(err)
	}
	e.deletePod("first")
	node.waitUnprepared(string(claim.UID))

	// The device serves the next pod, prepared afresh.
	e.createPod("second", nil, []v1.Container{e.container("main", 1)})
	second := e.waitRunning("second")
	if err := node.checkPrepared(e.claimOf(second)); err != nil {
		t.Fatal(err)
	}
}

// A driver that crashes and comes back (a DaemonSet upgrade looks the
// same to the kubelet) registers again, and the new process unprepares
// the claim the old one prepared once the pod is deleted.
func TestKubeletDriverRestart(t *testing.T) {
	e := newKubeletEnv(t, "kubelet-restart")
	e.class("kubelet-restart-gpu", e.driver, e.resource)
	node := e.kubeletNode("kubelet-restart-node", nodeSetup{devices: 1})

	e.createPod("before", nil, []v1.Container{e.container("main", 1)})
	claim := e.claimOf(e.waitRunning("before"))
	if err := node.checkPrepared(claim); err != nil {
		t.Fatal(err)
	}
	node.restartDriver()
	e.deletePod("before")
	node.waitUnprepared(string(claim.UID))

	e.createPod("after", nil, []v1.Container{e.container("main", 1)})
	after := e.waitRunning("after")
	if err := node.checkPrepared(e.claimOf(after)); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}

// kubemark's stock hollow node (stub container manager) runs the same pod
// to Running without ever calling the driver. The node-side check must
// catch that instead of passing.
func TestStubHollowNodeIsCaught(t *testing.T) {
	e := newKubeletEnv(t, "kubelet-stub")
	e.class("kubelet-stub-gpu", e.driver, e.resource)
	node := e.kubeletNode("kubelet-stub-node", nodeSetup{devices: 1, stub: true})

	e.createPod("stub", nil, []v1.Container{e.container("main", 1)})
	pod := e.waitRunning("stub")
	claim := e.claimOf(pod)
	if len(devices(claim)) != 1 {
		t.Fatalf("the scheduler allocated %v, want one device", devices(claim))
	}
	err := node.checkPrepared(claim)
	if err == nil || !strings.Contains(err.Error(), "no NodePrepareResources call") {
		t.Fatalf("node-side check on a stub node = %v, want it to report no NodePrepareResources call", err)
	}
	if got := node.gotCDI(pod); len(got["main"]) != 0 {
		t.Errorf("stub node gave CDI devices %v", got)
	}
}
