package liveview

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/simulator/input"
)

func TestRead(t *testing.T) {
	pod := func(name, nodeName string, phase v1.PodPhase, deleting bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: v1.PodSpec{NodeName: nodeName}, Status: v1.PodStatus{Phase: phase}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	objects := []runtime.Object{
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		pod("running", "n1", v1.PodRunning, false),
		pod("pending", "", v1.PodPending, false),
		pod("done", "n1", v1.PodSucceeded, false),
		pod("failed", "", v1.PodFailed, false),
		pod("terminating", "n1", v1.PodRunning, true),
		// Left on a node that is gone: it runs nowhere, as the loop reads it.
		pod("orphan", "gone", v1.PodRunning, false),
		&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}},
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}},
		&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c"}},
		&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "t"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "gpu-driver"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := Read(ctx, fake.NewClientset(objects...), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(list []*v1.Pod) []string {
		var out []string
		for _, p := range list {
			out = append(out, p.Name)
		}
		return out
	}
	if len(objs.Nodes) != 2 || objs.Nodes[0].Name != "n1" {
		t.Errorf("nodes = %v, want n1, n2 in order", objs.Nodes)
	}
	if got := names(objs.RunningPods); len(got) != 2 || got[0] != "running" || got[1] != "terminating" {
		t.Errorf("running pods = %v, want [running terminating]", got)
	}
	if got := names(objs.PendingPods); len(got) != 1 || got[0] != "pending" {
		t.Errorf("pending pods = %v, want [pending]", got)
	}
	if len(objs.DeviceClasses) != 1 || len(objs.ResourceSlices) != 1 || len(objs.ResourceClaims) != 1 || len(objs.ResourceClaimTemplates) != 1 {
		t.Errorf("DRA objects: %d classes, %d slices, %d claims, %d templates; want one each",
			len(objs.DeviceClasses), len(objs.ResourceSlices), len(objs.ResourceClaims), len(objs.ResourceClaimTemplates))
	}
	if len(objs.DaemonSets) != 1 {
		t.Errorf("DaemonSets = %d, want 1: a live plan counts their pods on new nodes as a dump plan does", len(objs.DaemonSets))
	}
}

func TestWatchReplansOnChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	pending := make(chan int)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, client, nil, 0, 10*time.Millisecond, func(objs *input.Objects) error {
			select {
			case pending <- len(objs.PendingPods):
			case <-ctx.Done():
			}
			return nil
		})
	}()
	next := func() int {
		t.Helper()
		select {
		case n := <-pending:
			return n
		case <-ctx.Done():
			t.Fatal("no snapshot")
			return -1
		}
	}
	if n := next(); n != 0 {
		t.Fatalf("first snapshot: %d pending pods, want 0", n)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := client.CoreV1().Pods("ml").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The two creations may come as one batch or two, and the initial
	// list's events may still be arriving (a snapshot with 0); the last
	// snapshot has both.
	for n := next(); n != 2; n = next() {
		if n != 0 && n != 1 {
			t.Fatalf("snapshot with %d pending pods, want 0, 1 or 2", n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch returned %v after its context ended, want nil", err)
	}
}
