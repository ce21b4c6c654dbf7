package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"draxr.dev/draxr/autoscaler/backoff"
	"draxr.dev/draxr/autoscaler/clusterstate"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/test/fakeprovider"
)

// Each recommended action is applied on its own: the cloud call it names,
// its outcome set on it, its success or failure event recorded, the group
// backed off; a failed call never stops the next.
func TestApplyClusterActions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := fakeprovider.New(fake.NewClientset(), func() time.Time { return now })
	group := func(name string) *nodegroup.NodeGroup {
		return &nodegroup.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodegroup.Spec{MaxSize: 5, Template: *fx.Node("t", 8, 32, nil)}}
	}
	locked := p.AddGroup(group("locked"), fakeprovider.Faults{NeverRegister: true, DecreaseTargetSizeErr: errors.New("locked")})
	open := p.AddGroup(group("open"), fakeprovider.Faults{NeverRegister: true})
	for _, g := range []*fakeprovider.Group{locked, open} {
		if err := g.IncreaseSize(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	rec := record.NewFakeRecorder(10)
	reg := clusterstate.NewRegistry(clusterstate.RegistryConfig{Recorder: rec, EventObject: &v1.ConfigMap{},
		Backoff: backoff.New(backoff.DefaultInitial, backoff.DefaultMax, backoff.DefaultResetTimeout)})
	failure := &clusterstate.Event{Type: v1.EventTypeWarning, Reason: clusterstate.EventFailedToRevertScaleUp, Message: "Failed to revert locked"}
	actions := []clusterstate.Action{
		{Kind: clusterstate.RevertScaleUp, Group: locked, Delta: -2, OnFailure: failure},
		{Kind: clusterstate.RevertScaleUp, Group: open, Delta: -2, OnFailure: failure,
			OnSuccess: &clusterstate.Event{Type: v1.EventTypeNormal, Reason: "Reverted", Message: "open given back"}},
		{Kind: clusterstate.BackOff, Group: open, Reason: backoff.Reason{Code: clusterstate.CodeTimeout}},
		{Kind: clusterstate.Emit, Group: open, Event: clusterstate.Event{Type: v1.EventTypeWarning, Reason: clusterstate.EventScaleUpTimedOut, Message: "timed out"}},
		{Kind: "Reboot", Group: open},
	}
	ApplyClusterActions(ctx, reg, actions, now)

	for i, a := range actions {
		if !a.Applied {
			t.Errorf("action %d (%s) not marked applied", i, a.Kind)
		}
	}
	if err := actions[0].Err; err == nil || err.Error() != "locked" {
		t.Errorf("failed revert: Err %v, want the provider's \"locked\"", err)
	}
	if actions[1].Err != nil || !slices.Equal(open.Decreases(), []int{-2}) || len(locked.Decreases()) != 0 {
		t.Errorf("revert after a failed one: Err %v, decreases open %v locked %v; want open given back 2", actions[1].Err, open.Decreases(), locked.Decreases())
	}
	if !reg.BackoffStatus("open", now).BackedOff || reg.BackoffStatus("locked", now).BackedOff {
		t.Error("only the group named by the BackOff action is backed off")
	}
	if err := actions[4].Err; err == nil || !strings.Contains(err.Error(), `unknown cluster-state action "Reboot"`) {
		t.Errorf("unknown action: Err %v", err)
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	want := []string{"Warning FailedToRevertScaleUp Failed to revert locked: locked", "Normal Reverted open given back", "Warning ScaleUpTimedOut timed out"}
	if !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}
