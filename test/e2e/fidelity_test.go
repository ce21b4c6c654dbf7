package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"context"

	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/placement"
)

// The planner, reading the live cluster and the scheduler's own
// configuration, predicts which pending pods fit the existing nodes; then
// a scheduler starts and binds exactly those pods, with the same number of
// devices taken on each node.
func TestPlannerFidelity(t *testing.T) {
	e := newEnv(t, "fidelity")
	e.class("fidelity-gpu", e.driver, e.resource)
	capacity := map[string]int{"fidelity-a": 2, "fidelity-b": 3, "fidelity-c": 4, "fidelity-d": 8}
	for name, n := range capacity {
		e.draNode(name, e.driver, n)
	}
	// Pods are created gated; the planner plans them all, then the gates
	// come off one pod at a time in the planner's order (priority,
	// creation, name), each waiting for the scheduler's verdict. A backlog
	// would otherwise reach the scheduler's queue in list order, which the
	// API server does not define. Two-GPU pods come first, then one-GPU.
	var names []string
	for i := 0; i < 5; i++ {
		names = append(names, e.fidelityPod(fmt.Sprintf("a-two-%d", i), 2))
	}
	for i := 0; i < 8; i++ {
		names = append(names, e.fidelityPod(fmt.Sprintf("b-one-%d", i), 1))
	}

	objs, err := liveview.Read(e.ctx, cp.Client, cp.AdminConfig) // as draxr simulate --kubeconfig reads it
	if err != nil {
		t.Fatal(err)
	}
	var pending []*v1.Pod
	for _, p := range objs.PendingPods {
		if p.Namespace == e.ns {
			p.Spec.SchedulingGates = nil // planned as they will be once released
			pending = append(pending, p)
		}
	}
	objs.PendingPods = pending
	profile, err := placement.LoadProfile(schedulerOptions("").Config, "")
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler below runs this configuration under the profile name
	// "fidelity", the pods' schedulerName; the planner only plans pods of
	// the profile it runs.
	profile.SchedulerName = "fidelity"
	res, err := offline.Simulate(e.ctx, objs, offline.Options{Profile: profile,
		Requests: provisioning.OfflineStep("", provisioning.DefaultInitialBackoff)})
	if err != nil {
		t.Fatal(err)
	}
	predicted := map[string]string{}
	predictedDevices := map[string]int{}
	for _, pl := range res.Plan.ExistingNodes {
		predicted[pl.Pod.Name] = pl.Node
		predictedDevices[pl.Node] += len(pl.Devices)
	}
	// 17 devices for 18 asked: every two-GPU pod fits (2+3+4+8 devices
	// hold 8 of them), then 7 one-GPU pods fill what is left.
	if len(predicted) != 12 || predicted["b-one-7"] != "" {
		t.Fatalf("planner placed %v, want all but b-one-7", predicted)
	}

	stop, err := cp.StartScheduler(e.ctx, schedulerOptions("fidelity"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	bound := map[string]string{}
	for _, name := range names {
		pod, err := cp.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.SchedulingGates = nil
		if _, err := cp.Client.CoreV1().Pods(e.ns).Update(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if node := e.waitSettled(name); node != "" {
			bound[name] = node
		}
	}
	if got, want := sortedKeys(bound), sortedKeys(predicted); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("bound pods %v, planner predicted %v", got, want)
	}
	boundDevices := map[string]int{}
	claims, err := cp.Client.ResourceV1().ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		for _, d := range devices(&c) {
			node, _, _ := strings.Cut(d, "/")
			boundDevices[node]++
		}
	}
	for node, n := range capacity {
		if boundDevices[node] != predictedDevices[node] || boundDevices[node] != n {
			t.Errorf("node %s: scheduler took %d devices, planner predicted %d, node has %d",
				node, boundDevices[node], predictedDevices[node], n)
		}
	}
}

func (e *env) fidelityPod(name string, gpus int64) string {
	e.t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1.PodSpec{
			SchedulerName:                 "fidelity",
			SchedulingGates:               []v1.PodSchedulingGate{{Name: "draxr.dev/fidelity"}},
			NodeSelector:                  map[string]string{"e2e-test": e.name},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{e.resource: *resourceQuantity(gpus)}}}},
		},
	}
	if _, err := cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return name
}

// waitSettled waits until the scheduler bound the pod (returns the node,
// once the claim status is written) or found it unschedulable ("").
func (e *env) waitSettled(name string) string {
	e.t.Helper()
	node := ""
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if p.Spec.NodeName != "" && p.Status.ExtendedResourceClaimStatus != nil {
			node = p.Spec.NodeName
			return true, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("pod %s: no scheduling verdict: %v", name, err)
	}
	return node
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
