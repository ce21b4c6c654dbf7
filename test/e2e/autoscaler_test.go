package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"draxr.dev/draxr/scheduler/classes"
)

// From zero nodes, 20 one-GPU pods and a group of 8-GPU nodes: exactly 3
// nodes, every pod bound, and no further scale-up in the next loops. Then
// the pods go and the group shrinks back to its min size.
func TestAutoscalerFromZeroDRA(t *testing.T) {
	e := newEnv(t, "asdra")
	e.class("asdra-gpu", e.driver, e.resource)
	_, addr := e.autoscalerWithAddress(e.nodeGroups(groupSpec{name: "asdra-gpu", min: 1, max: 10, draDevices: 8}))
	e.replicaSet("train", 20, e.resource, 1)
	perNode := e.waitPodsBound(20, 90*time.Second)
	if len(perNode) != 3 {
		t.Fatalf("pods per node = %v, want 3 nodes", perNode)
	}
	// The local provider reads Nodes and slices through the autoscaler's
	// informers: the steady loops send no LIST (the audit log).
	e.noListsWhile(addr, 3, func() {
		e.consistently(4*time.Second, "no further scale-up", func() error {
			if n := len(e.groupNodes("asdra-gpu")); n != 3 {
				return fmt.Errorf("group has %d nodes, want 3", n)
			}
			return nil
		})
	})
	claims, err := cp.Client.ResourceV1().ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 20 {
		t.Fatalf("extended-resource claims = %d (%v), want 20", len(claims.Items), err)
	}
	for _, path := range []string{"/health-check", "/healthz"} {
		if body := httpGet(t, "http://"+addr+path); body != "OK" {
			t.Errorf("%s = %q, want OK", path, body)
		}
	}
	// CA's metric names, with CA's labels, and draxr's devices per class.
	body := httpGet(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`cluster_autoscaler_scaled_up_nodes_total{dra_drivers="` + e.driver + `",gpu_name="",gpu_resource_name=""} 3`,
		`draxr_autoscaler_devices_in_use{device_class="asdra-gpu"} 20`,
		`cluster_autoscaler_node_groups_count{node_group_type="autoscaled"} 1`,
		`cluster_autoscaler_cluster_safe_to_autoscale 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(body, "autoscaler_"))
		}
	}
	// The 20 pods may be planned over more than one loop as nodes come
	// up, so the devices planned are at least some and at most 20.
	if m := regexp.MustCompile(`draxr_autoscaler_planned_devices_total\{device_class="asdra-gpu"\} (\d+)\n`).FindStringSubmatch(body); m == nil {
		t.Errorf("/metrics lacks draxr_autoscaler_planned_devices_total for asdra-gpu:\n%s", grepLines(body, "draxr_autoscaler_"))
	} else if n, _ := strconv.Atoi(m[1]); n < 1 || n > 20 {
		t.Errorf("draxr_autoscaler_planned_devices_total{device_class=asdra-gpu} = %d, want 1..20", n)
	}
	if s, _, err := e.status(); err != nil {
		t.Error(err)
	} else if len(s.NodeGroups) != 1 || s.NodeGroups[0].Name != "asdra-gpu" || s.NodeGroups[0].Health.CloudProviderTarget != 3 {
		t.Errorf("status node groups = %+v, want asdra-gpu with target 3", s.NodeGroups)
	}

	e.scaleReplicaSet("train", 0)
	e.eventually(60*time.Second, "scale down to min size 1", func() error {
		if n := len(e.groupNodes("asdra-gpu")); n != 1 {
			return fmt.Errorf("group has %d nodes", n)
		}
		return nil
	})
	e.consistently(3*time.Second, "never below min size", func() error {
		if n := len(e.groupNodes("asdra-gpu")); n != 1 {
			return fmt.Errorf("group has %d nodes, want 1", n)
		}
		return nil
	})
}

// 600 one-GPU pods from zero: one loop asks the group for all 75 8-GPU
// nodes at once (the local provider creates them in parallel) and every
// pod is bound. The seconds from the first pending pod to the last bound
// one are logged.
func TestAutoscalerBulkScaleUp(t *testing.T) {
	// About 70 s on a quiet 2-core machine; minutes under load (430 s at
	// load average 55, when the local provider still readied nodes
	// through the autoscaler's 5-QPS client), hence the budget.
	e := newEnvWithin(t, "asbulk", 10*time.Minute)
	e.class("asbulk-gpu", e.driver, e.resource)
	start := time.Now()
	e.replicaSet("train", 600, e.resource, 1)
	// The autoscaler starts once the scheduler has given up on every pod,
	// so its first loop sees all 600.
	e.eventually(2*time.Minute, "600 pods unschedulable", func() error {
		pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonUnschedulable {
					n++
				}
			}
		}
		if n != 600 {
			return fmt.Errorf("%d unschedulable", n)
		}
		return nil
	})
	// CA's default --scale-down-delay-after-add, not the suite's 0s: this
	// test is about the scale-up. Under heavy load, nodes still empty for
	// the suite's 2s unneeded time were removed while 408 pods were
	// pending (one cause, pods binding to a node not yet known, is fixed:
	// TestPodBindingToAnUnknownNodeKeepsItsNode).
	_, addr := e.autoscalerWithAddress(e.nodeGroups(groupSpec{name: "asbulk-gpu", min: 0, max: 100, draDevices: 8}),
		"--scale-down-delay-after-add=10m")
	perNode := e.waitPodsBound(600, 7*time.Minute)
	t.Logf("600 pods: first pending to last bound in %.1f s", time.Since(start).Seconds())
	if len(perNode) != 75 {
		t.Fatalf("pods bound on %d nodes, want 75", len(perNode))
	}
	if n := len(e.groupNodes("asbulk-gpu")); n != 75 {
		t.Fatalf("group has %d nodes, want 75", n)
	}
	events, err := cp.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "TriggeredScaleUp").String()})
	if err != nil || len(events.Items) == 0 {
		t.Fatalf("TriggeredScaleUp events: %d (%v), want some", len(events.Items), err)
	}
	for _, ev := range events.Items {
		// One scale-up for the whole plan: every pod's event names 0->75.
		if !strings.Contains(ev.Message, "{asbulk-gpu 0->75 (max: 100)}") {
			t.Errorf("event on %s: %q, want the single scale-up 0->75", ev.InvolvedObject.Name, ev.Message)
		}
	}
	if body := httpGet(t, "http://"+addr+"/metrics"); !strings.Contains(body, `cluster_autoscaler_scaled_up_nodes_total{dra_drivers="`+e.driver+`",gpu_name="",gpu_resource_name=""} 75`) {
		t.Errorf("/metrics lacks 75 scaled-up nodes for asbulk-gpu:\n%s", grepLines(body, "cluster_autoscaler_scaled_up"))
	}
}

// The same with a device-plugin group: the template advertises 8 GPUs in
// allocatable.
func TestAutoscalerFromZeroDevicePlugin(t *testing.T) {
	e := newEnv(t, "asdp")
	e.autoscaler(e.nodeGroups(groupSpec{name: "asdp-gpu", min: 0, max: 10, pluginDevices: 8}))
	e.replicaSet("train", 20, e.resource, 1)
	if perNode := e.waitPodsBound(20, 90*time.Second); len(perNode) != 3 {
		t.Fatalf("pods per node = %v, want 3 nodes", perNode)
	}
	e.consistently(3*time.Second, "no further scale-up", func() error {
		if n := len(e.groupNodes("asdp-gpu")); n != 3 {
			return fmt.Errorf("group has %d nodes, want 3", n)
		}
		return nil
	})
}

// The implicit name deviceclass.resource.kubernetes.io/<class> from zero.
func TestAutoscalerImplicitName(t *testing.T) {
	e := newEnv(t, "asimpl")
	class := e.class("asimpl-gpu", e.driver, "")
	e.autoscaler(e.nodeGroups(groupSpec{name: "asimpl-gpu", min: 0, max: 10, draDevices: 4}))
	e.replicaSet("train", 6, classes.ImplicitName(class.Name), 2)
	if perNode := e.waitPodsBound(6, 90*time.Second); len(perNode) != 3 {
		t.Fatalf("pods per node = %v, want 3 nodes (2 two-device pods each)", perNode)
	}
}

// Two half-used GPU nodes are consolidated into one: the pods of one move
// (evicted, recreated by their ReplicaSet) and the node goes.
func TestAutoscalerConsolidates(t *testing.T) {
	e := newEnv(t, "ascons")
	e.class("ascons-gpu", e.driver, e.resource)
	e.autoscaler(e.nodeGroups(groupSpec{name: "ascons-gpu", min: 0, max: 10, draDevices: 8}))
	e.replicaSet("train", 12, e.resource, 1)
	e.waitPodsBound(12, 90*time.Second)
	e.scaleReplicaSet("train", 6)
	e.eventually(60*time.Second, "consolidation to one node", func() error {
		if n := len(e.groupNodes("ascons-gpu")); n != 1 {
			return fmt.Errorf("group has %d nodes", n)
		}
		return nil
	})
	e.eventually(60*time.Second, "all 6 pods on the remaining node", func() error {
		if perNode := e.podsPerNode(); len(perNode) != 1 || sum(perNode) != 6 {
			return fmt.Errorf("pods per node = %v", perNode)
		}
		return nil
	})
	events, err := cp.Client.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "ScaleDown").String()})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no ScaleDown event on the removed node (%v)", err)
	}
}

// Killed right after asking for nodes, a restarted autoscaler counts the
// nodes still coming up and asks for no more.
func TestAutoscalerRestartDoesNotScaleUpTwice(t *testing.T) {
	e := newEnv(t, "asrestart")
	e.class("asrestart-gpu", e.driver, e.resource)
	groups := e.nodeGroups(groupSpec{name: "asrestart-gpu", min: 0, max: 10, draDevices: 8})
	slow := []string{"--local-node-ready-delay=4s"}
	first := e.autoscaler(groups, slow...)
	e.replicaSet("train", 20, e.resource, 1)
	// IncreaseSize creates the three Node objects in one call; kill the
	// autoscaler as soon as it has returned, while the nodes are not Ready.
	e.eventually(30*time.Second, "scale-up asked for", func() error {
		if n := len(e.groupNodes("asrestart-gpu")); n != 3 {
			return fmt.Errorf("%d nodes so far", n)
		}
		return nil
	})
	first.Kill()
	for _, n := range e.groupNodes("asrestart-gpu") {
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				t.Logf("node %s was already Ready when the autoscaler was killed", n.Name)
			}
		}
	}
	e.autoscaler(groups, slow...)
	e.waitPodsBound(20, 90*time.Second)
	e.consistently(3*time.Second, "no extra nodes after the restart", func() error {
		if n := len(e.groupNodes("asrestart-gpu")); n != 3 {
			return fmt.Errorf("group has %d nodes, want 3", n)
		}
		return nil
	})
}

// A pod no node of any group can hold gets a NotTriggerScaleUp event with
// the planner's reason; the status ConfigMap carries it too.
func TestAutoscalerExplainsPodsItCannotHelp(t *testing.T) {
	e := newEnv(t, "asreason")
	e.class("asreason-gpu", e.driver, e.resource)
	e.autoscaler(e.nodeGroups(groupSpec{name: "asreason-gpu", min: 0, max: 2, draDevices: 8}))
	e.pod("giant", e.resource, 9)
	want := fmt.Sprintf("needs 9 %s; a asreason-gpu node offers 8", e.resource)
	e.eventually(60*time.Second, "NotTriggerScaleUp event", func() error {
		events, err := cp.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "giant").String()})
		if err != nil {
			return err
		}
		for _, ev := range events.Items {
			if ev.Reason == "NotTriggerScaleUp" && strings.Contains(ev.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none NotTriggerScaleUp with %q", len(events.Items), want)
	})
	// The event is recorded during the loop, the status ConfigMap written
	// at its end: wait for the status of that loop.
	e.eventually(30*time.Second, "the reason in the status ConfigMap", func() error {
		s, d, err := e.status()
		if err != nil {
			return err
		}
		reason := false
		for _, n := range d.NoScaleUp {
			reason = reason || strings.Contains(n.Reason, want)
		}
		if !reason || len(s.NodeGroups) != 1 || s.NodeGroups[0].Name != "asreason-gpu" {
			return fmt.Errorf("status lacks the reason (draxr key: %+v) or the group (%+v)", d.NoScaleUp, s.NodeGroups)
		}
		return nil
	})
	if n := len(e.groupNodes("asreason-gpu")); n != 0 {
		t.Errorf("group has %d nodes, want none for an unhelpable pod", n)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// healthOf reads a replica's /health-check body.
func healthOf(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/health-check")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Two replicas with leader election: one acts, so the pods get exactly the
// nodes they need, not twice as many; when the leader dies the other
// takes over and keeps scaling.
func TestAutoscalerLeaderElection(t *testing.T) {
	e := newEnv(t, "asleader")
	e.class("asleader-gpu", e.driver, e.resource)
	groups := e.nodeGroups(groupSpec{name: "asleader-gpu", min: 0, max: 10, draDevices: 8})
	election := []string{"--leader-elect=true", "--leader-elect-resource-name=draxr-autoscaler-" + e.name,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}
	first := e.autoscaler(groups, election...)
	second := e.autoscaler(groups, election...)
	e.replicaSet("train", 12, e.resource, 1)
	if perNode := e.waitPodsBound(12, 90*time.Second); len(perNode) != 2 {
		t.Fatalf("pods per node = %v, want 2 nodes", perNode)
	}
	e.consistently(3*time.Second, "one replica acts", func() error {
		if n := len(e.groupNodes("asleader-gpu")); n != 2 {
			return fmt.Errorf("group has %d nodes, want 2", n)
		}
		return nil
	})
	lease, err := cp.Client.CoordinationV1().Leases("kube-system").Get(e.ctx, "draxr-autoscaler-"+e.name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease = %v (%v), want a holder", lease, err)
	}
	// Identities end in _<pid>: kill the leader as a crash would.
	holder := *lease.Spec.HolderIdentity
	leader := first
	if strings.HasSuffix(holder, fmt.Sprintf("_%d", second.PID())) {
		leader = second
	} else if !strings.HasSuffix(holder, fmt.Sprintf("_%d", first.PID())) {
		t.Fatalf("lease holder %q is neither replica", holder)
	}
	leader.Kill()
	e.scaleReplicaSet("train", 20)
	if perNode := e.waitPodsBound(20, 90*time.Second); len(perNode) != 3 {
		t.Fatalf("after the leader died: pods per node = %v, want 3 nodes", perNode)
	}
}
