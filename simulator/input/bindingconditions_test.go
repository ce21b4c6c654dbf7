package input

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A claim allocated on node-0 to a device with binding conditions
// (KEP-5007), reserved for pod uid-p.
func bindingClaim(allocated time.Time, conditions ...metav1.Condition) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric-gpu", Namespace: "ml"},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{
				AllocationTimestamp: &metav1.Time{Time: allocated},
				NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-0"}}}}}},
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: "fabric.example.com", Pool: "fabric", Device: "gpu-3",
					BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{"AttachFailed"}}}},
			},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}},
			Devices: []resourceapi.AllocatedDeviceStatus{{Driver: "fabric.example.com", Pool: "fabric", Device: "gpu-3",
				Conditions: conditions}},
		},
	}
}

func cond(typ string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}
}

// The scheduler's PreBind waits for a device's binding conditions: its pod
// is being bound on node-0 until they are met; when a failure condition is
// true or the wait outlasts the binding timeout, the scheduler deallocates
// and the pod is pending again (it may drive a scale-up).
func TestBindingConditions(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	wait := BindingWait{Now: start.Add(time.Minute), Timeout: 10 * time.Minute}
	for _, tc := range []struct {
		name      string
		claim     *resourceapi.ResourceClaim
		wantState BindingState
		bound     bool
	}{
		{name: "waiting for Attached", claim: bindingClaim(start), wantState: BindingWaiting, bound: true},
		{name: "Attached", claim: bindingClaim(start, cond("Attached", metav1.ConditionTrue)), wantState: BindingReady, bound: true},
		{name: "AttachFailed", claim: bindingClaim(start, cond("AttachFailed", metav1.ConditionTrue)), wantState: BindingFailed},
		{name: "timed out", claim: bindingClaim(start.Add(-time.Hour)), wantState: BindingFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, deadline := ClaimBinding(tc.claim, wait)
			if state != tc.wantState {
				t.Fatalf("state %v, want %v", state, tc.wantState)
			}
			inBinding := PodsInBinding(DropFailedBindings([]*resourceapi.ResourceClaim{tc.claim}, wait))
			if node, ok := inBinding[types.UID("uid-p")]; ok != tc.bound || (ok && node != "node-0") {
				t.Errorf("in binding %v, want the pod bound to node-0: %v", inBinding, tc.bound)
			}
			waiting := WaitingOnBindingConditions([]*resourceapi.ResourceClaim{tc.claim}, wait)
			if tc.wantState != BindingWaiting {
				if len(waiting) != 0 {
					t.Errorf("waiting %v, want none", waiting)
				}
				return
			}
			w := waiting[types.UID("uid-p")]
			if !deadline.Equal(start.Add(10*time.Minute)) || !strings.Contains(w.Reason(), "waiting for device binding conditions on node-0: ResourceClaim ml/fabric-gpu") ||
				!strings.Contains(w.Reason(), "2026-03-01T10:10:00Z") {
				t.Errorf("deadline %v, reason %q; want 10:10 on node-0", deadline, w.Reason())
			}
		})
	}
}
