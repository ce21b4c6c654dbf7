package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/simulator/drainability"
)

// nodeOf waits until the ReplicaSet's pods are bound and returns the node
// of the first one.
func (e *env) nodeOf(rs string) string {
	e.t.Helper()
	var node string
	e.eventually(90*time.Second, "pod of "+rs+" bound", func() error {
		pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + rs})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				node = p.Spec.NodeName
				return nil
			}
		}
		return fmt.Errorf("%d pods, none bound", len(pods.Items))
	})
	return node
}

// pinnedReplicaSet runs one CPU-only pod bound to node by spec.nodeName,
// owned by a ReplicaSet (so only the rule under test can block it);
// change adjusts the pod template.
func (e *env) pinnedReplicaSet(ns, name, node string, change func(*v1.PodTemplateSpec)) {
	e.t.Helper()
	labels := map[string]string{"app": name}
	tmpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
		NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []v1.Container{{Name: "main", Image: "registry.example/app"}},
	}}
	if change != nil {
		change(&tmpl)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cp.Client.AppsV1().ReplicaSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func (e *env) nodeExists(name string) bool {
	_, err := cp.Client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	return err == nil
}

// twoNodes scales a group up to two nodes each 5/8 used (so neither is a
// candidate) and returns them: anchor stays busy, spare empties once the
// ReplicaSet "second" is scaled to zero.
func (e *env) twoNodes(extra ...string) (anchor, spare string) {
	e.t.Helper()
	e.class(e.name+"-gpu", e.driver, e.resource)
	e.autoscaler(e.nodeGroups(groupSpec{name: e.name + "-gpu", min: 0, max: 5, draDevices: 8}), extra...)
	e.replicaSet("anchor", 1, e.resource, 5)
	anchor = e.nodeOf("anchor")
	e.replicaSet("second", 1, e.resource, 5)
	spare = e.nodeOf("second")
	if anchor == spare {
		e.t.Fatalf("both 5-device pods on node %s", anchor)
	}
	return anchor, spare
}

// CA's rules keep a node whose pod may not be moved, though the pod would
// fit elsewhere; the control (an ordinary pod) lets the node go. Each kept
// node has its reason in the status ConfigMap and in a NoScaleDown event.
func TestAutoscalerScaleDownSafetyRules(t *testing.T) {
	tests := []struct {
		name       string
		ns         string // "" for the env's namespace
		change     func(*v1.PodTemplateSpec)
		nodeAnnot  bool
		wantReason string // "" when the node goes
	}{
		{name: "sdcontrol"},
		{name: "sdemptydir", wantReason: "LocalStorageRequested", change: func(p *v1.PodTemplateSpec) {
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		}},
		{name: "sdnoevict", wantReason: "NotSafeToEvictAnnotation", change: func(p *v1.PodTemplateSpec) {
			p.Annotations = map[string]string{drainability.SafeToEvictAnnotation: "false"}
		}},
		{name: "sdsystem", ns: metav1.NamespaceSystem, wantReason: "UnmovableKubeSystemPod"},
		{name: "sddisabled", nodeAnnot: true, wantReason: "ScaleDownDisabledAnnotation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.name)
			_, spare := e.twoNodes()
			ns := e.ns
			if tc.ns != "" {
				ns = tc.ns
			}
			e.pinnedReplicaSet(ns, "probe-"+tc.name, spare, tc.change)
			if tc.nodeAnnot {
				n, err := cp.Client.CoreV1().Nodes().Get(e.ctx, spare, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if n.Annotations == nil {
					n.Annotations = map[string]string{}
				}
				n.Annotations[drainability.ScaleDownDisabledAnnotation] = "true"
				if _, err := cp.Client.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			e.scaleReplicaSet("second", 0)
			if tc.wantReason == "" {
				e.eventually(60*time.Second, "the spare node removed", func() error {
					if e.nodeExists(spare) {
						return fmt.Errorf("node %s still there", spare)
					}
					return nil
				})
				return
			}
			e.eventually(60*time.Second, "the kept node's reason in the status", func() error {
				_, d, err := e.status()
				if err != nil {
					return err
				}
				for _, u := range d.UnremovableNodes {
					if u.Node == spare && strings.Contains(u.Reason+": "+u.Message, tc.wantReason) {
						return nil
					}
				}
				return fmt.Errorf("unremovable nodes: %+v", d.UnremovableNodes)
			})
			e.eventually(30*time.Second, "NoScaleDown event on the node", func() error {
				evs, err := cp.Client.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
					fields.OneTermEqualSelector("reason", core.EventNoScaleDown), fields.OneTermEqualSelector("involvedObject.name", spare)).String()})
				if err != nil {
					return err
				}
				for _, ev := range evs.Items {
					if strings.Contains(ev.Message, tc.wantReason) {
						return nil
					}
				}
				return fmt.Errorf("%d NoScaleDown events, none with %s", len(evs.Items), tc.wantReason)
			})
			// Unneeded time is 2s: a node the rules did not keep would be gone.
			e.consistently(5*time.Second, "the node is kept", func() error {
				if !e.nodeExists(spare) {
					return fmt.Errorf("node %s removed", spare)
				}
				return nil
			})
		})
	}
}

// Two nodes removed in one batch both carry ToBeDeletedByClusterAutoscaler
// before the first pod of either is evicted (etcd's resource versions
// order the writes).
func TestAutoscalerScaleDownBatchTaintedFirst(t *testing.T) {
	e := newEnv(t, "sdbatch")
	e.class(e.name+"-gpu", e.driver, e.resource)
	_, addr := e.autoscalerWithAddress(e.nodeGroups(groupSpec{name: e.name + "-gpu", min: 0, max: 5, draDevices: 8}), "--max-drain-parallelism=2")
	// The drained nodes must turn unneeded in the same loop, or they go
	// in two batches: a node is unneeded while fresh and empty, and again
	// while its "second" pod terminates, at moments of its own. One
	// PodDisruptionBudget over the pinned pods, there before they are,
	// keeps both nodes from the moment their pinned pod lands until it is
	// deleted: a single object, so the autoscaler sees both released in
	// the same loop (annotating the two nodes one after the other let a
	// loop fall between the two patches).
	hold := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "hold", Namespace: e.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"batch": "held"}},
		},
	}
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, hold, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.replicaSet("anchor", 1, e.resource, 4)
	anchor := e.nodeOf("anchor")
	e.replicaSet("second", 2, e.resource, 7)
	e.waitPodsBound(3, 90*time.Second)
	var drained []string
	for n := range e.podsPerNode() {
		if n != anchor {
			drained = append(drained, n)
		}
	}
	if len(drained) != 2 {
		t.Fatalf("nodes besides the anchor = %v, want 2", drained)
	}
	for i, n := range drained {
		e.pinnedReplicaSet(e.ns, fmt.Sprintf("pinned-%d", i), n, func(tmpl *v1.PodTemplateSpec) {
			tmpl.Labels["batch"] = "held"
		})
	}
	e.eventually(30*time.Second, "pinned pods created", func() error {
		if got := sum(e.podsPerNode()); got != 5 {
			return fmt.Errorf("%d pods", got)
		}
		return nil
	})
	e.scaleReplicaSet("second", 0)
	e.eventually(60*time.Second, "the second pods gone", func() error {
		pods, err := cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=second"})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left, terminating ones included", len(pods.Items))
		}
		return nil
	})
	// A loop that started after the pinned pods were there has seen both
	// nodes held and dropped any unneeded-since time from before (a fresh
	// empty node is unneeded): both start counting at the PDB's deletion.
	pinnedAt := time.Now()
	e.eventually(30*time.Second, "a loop with both nodes held", func() error {
		body := httpGet(t, "http://"+addr+"/metrics")
		last := metricValue(body, `cluster_autoscaler_last_activity{activity="main"}`)
		if last < float64(pinnedAt.Unix()+1) {
			return fmt.Errorf("last loop at %v, before the pinned pods", last)
		}
		if n := metricValue(body, "cluster_autoscaler_unneeded_nodes_count"); n != 0 {
			return fmt.Errorf("%v nodes unneeded", n)
		}
		return nil
	})
	nodeWatch, err := cp.Client.CoreV1().Nodes().Watch(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nodeWatch.Stop()
	podWatch, err := cp.Client.CoreV1().Pods(e.ns).Watch(e.ctx, metav1.ListOptions{LabelSelector: "app in (pinned-0,pinned-1)"})
	if err != nil {
		t.Fatal(err)
	}
	defer podWatch.Stop()
	if err := cp.Client.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, hold.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	taintRV := map[string]uint64{}
	var firstEvictionRV uint64
	deadline := time.After(60 * time.Second)
	for firstEvictionRV == 0 || len(taintRV) < 2 {
		select {
		case ev := <-nodeWatch.ResultChan():
			n, ok := ev.Object.(*v1.Node)
			if !ok || (n.Name != drained[0] && n.Name != drained[1]) || taintRV[n.Name] != 0 {
				continue
			}
			for _, tt := range n.Spec.Taints {
				if tt.Key == core.ToBeDeletedTaint && tt.Effect == v1.TaintEffectNoSchedule {
					taintRV[n.Name] = rv(t, n.ResourceVersion)
				}
			}
		case ev := <-podWatch.ResultChan():
			p, ok := ev.Object.(*v1.Pod)
			if ok && firstEvictionRV == 0 && (ev.Type == watch.Deleted || p.DeletionTimestamp != nil) {
				firstEvictionRV = rv(t, p.ResourceVersion)
			}
		case <-deadline:
			t.Fatalf("taints seen at %v, first eviction at %d", taintRV, firstEvictionRV)
		}
	}
	for n, r := range taintRV {
		if r > firstEvictionRV {
			t.Errorf("node %s tainted at resourceVersion %d, after the first eviction at %d", n, r, firstEvictionRV)
		}
	}
}

// metricValue is the value of the sample named exactly series (name and
// labels as /metrics prints them), -1 when absent.
func metricValue(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func rv(t *testing.T, s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return v
}

// A ToBeDeleted taint left by a killed autoscaler (as after a crash
// mid-drain) comes off once an autoscaler runs again.
func TestAutoscalerRemovesStaleTaintAfterRestart(t *testing.T) {
	e := newEnv(t, "sdstale")
	e.class(e.name+"-gpu", e.driver, e.resource)
	groups := e.nodeGroups(groupSpec{name: e.name + "-gpu", min: 0, max: 5, draDevices: 8})
	first := e.autoscaler(groups)
	e.replicaSet("anchor", 1, e.resource, 5)
	node := e.nodeOf("anchor")
	first.Kill()
	n, err := cp.Client.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: core.ToBeDeletedTaint, Value: strconv.FormatInt(time.Now().Unix(), 10), Effect: v1.TaintEffectNoSchedule})
	if _, err := cp.Client.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.autoscaler(groups)
	e.eventually(30*time.Second, "stale taint removed", func() error {
		n, err := cp.Client.CoreV1().Nodes().Get(e.ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == core.ToBeDeletedTaint {
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
		}
		return nil
	})
}
