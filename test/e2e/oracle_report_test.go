package e2e

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A cap leaves one of two alike pods out; the scheduler binds the other
// one and reports the planned one unschedulable. That is its tie-break:
// no pod is unbound against the plan, and the planned pod, now counted
// left out, is pending, not bound on an empty node name (failed CI on
// max-size-cap).
func TestOracleTieBreakSwapIsNoMiss(t *testing.T) {
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "train", UID: "rs-train", Controller: ptr.To(true)}
	pod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, OwnerReferences: []metav1.OwnerReference{ref}}}
	}
	pods := []*v1.Pod{pod("planned"), pod("left-out"), pod("other")}
	bound := map[string]string{"ml/planned": "", "ml/left-out": "gpu-new-1", "ml/other": "gpu-new-0"}
	rep := &oracleReport{}
	unbound, leftOut := swapSiblings(pods, []string{"ml/planned"}, []string{"ml/left-out"}, bound, rep)
	if len(unbound) != 0 || len(leftOut) != 1 || leftOut[0] != "ml/planned" || rep.Bound != 1 {
		t.Fatalf("after the swap: unbound %v, left out %v, bound %d; want none, [ml/planned], 1", unbound, leftOut, rep.Bound)
	}
	if got := leftOutBound(leftOut, bound); len(got) != 0 {
		t.Errorf("left out and bound: %v, want none (the planned pod is pending)", got)
	}
	if got := leftOutBound([]string{"ml/left-out"}, bound); len(got) != 1 || got[0] != "ml/left-out on gpu-new-1" {
		t.Errorf("a left-out pod the scheduler bound: %v, want [ml/left-out on gpu-new-1]", got)
	}
}
