package offline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/nodegroup"
	"draxr.dev/draxr/simulator/offline"
)

// A plan that takes many seconds stops soon after its context ends, with
// the context's error: `draxr simulate` stops on Ctrl-C through it.
func TestSimulateStopsWhenCancelled(t *testing.T) {
	// 5,000 pods no two alike, estimated for each of 40 groups: seconds
	// of planning, and no node group whose estimate answers for another.
	objs := &input.Objects{PendingPods: distinctPods(5000)}
	for g := range 40 {
		objs.NodeGroups = append(objs.NodeGroups, &nodegroup.NodeGroup{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%02d", g)},
			Spec:       nodegroup.Spec{MaxSize: 10000, Template: *fx.Node("template", int64(64+g), 256, nil)},
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	timer := time.AfterFunc(300*time.Millisecond, func() {
		cancelled = time.Now()
		cancel()
	})
	defer timer.Stop()
	_, err := offline.Simulate(ctx, objs, offline.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Simulate = %v, want context.Canceled", err)
	}
	if took := time.Since(cancelled); took > time.Second {
		t.Errorf("returned %v after the context ended, want within a second", took.Round(time.Millisecond))
	}
}
