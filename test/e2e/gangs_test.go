package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/report"
	"draxr.dev/draxr/simulator/scaleup"
	"draxr.dev/draxr/simulator/view"
)

// gang creates a PodGroup of minCount n with a gang policy and its n pods,
// each asking for one of the env's DRA-backed GPUs, for schedulerName.
func (e *env) gang(schedulerName, name string, n int) {
	e.t.Helper()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(n)}}}}
	if _, err := cp.Client.SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.gangPods(name, n, func(p *v1.Pod) {
		p.Spec.SchedulerName = schedulerName
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	})
}

// gangPods creates pods <name>-<i> asking one of the env's DRA-backed
// GPUs each, set as group says.
func (e *env) gangPods(name string, n int, group func(*v1.Pod)) {
	e.t.Helper()
	for i := range n {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: e.ns},
			Spec: v1.PodSpec{
				NodeSelector:                  map[string]string{"e2e-test": e.name},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Limits: v1.ResourceList{e.resource: *resourceQuantity(1)}}}},
			}}
		group(p)
		if _, err := cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// Gangs live, with the scheduler's own gang plugin (GenericWorkload on in
// the API server, the scheduler and draxr-autoscaler): a gang of 16
// one-GPU pods on 8-GPU nodes gets 2 nodes in one scale-up and binds; a
// gang one node over the group's max gets none, and each of its pods says
// why.
func TestGangsLive(t *testing.T) {
	e := newEnvWithin(t, "gang", 4*time.Minute)
	e.deleteOnCleanup(schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups"))
	e.class("gang-gpu", e.driver, e.resource)
	opts := schedulerOptions("gang")
	opts.Args = []string{"--feature-gates=GenericWorkload=true"}
	stop, err := cp.StartScheduler(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := cp.InstallCRDFiles(e.ctx, filepath.Join(root, "test/e2e/testdata/volcano/podgroups-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	e.deleteOnCleanup(view.VolcanoPodGroupsResource())
	groups := e.nodeGroups(groupSpec{name: "gang-gpu", min: 0, max: 4, draDevices: 8})
	e.autoscaler(groups, "--feature-gates=GenericWorkload=true", "--bypassed-scheduler-names=gang,volcano")

	e.gang("gang", "train", 16)
	e.eventually(time.Minute, "2 nodes", func() error {
		if n := len(e.groupNodes("gang-gpu")); n != 2 {
			return fmt.Errorf("%d nodes", n)
		}
		return nil
	})
	e.waitPodsBound(16, 90*time.Second)
	e.eventually(30*time.Second, "one ScaledUpGroup event, 0 -> 2", func() error {
		evs, err := cp.Client.CoreV1().Events("kube-system").List(e.ctx, metav1.ListOptions{
			FieldSelector: "reason=ScaledUpGroup,involvedObject.name=draxr-autoscaler-status-" + e.name})
		if err != nil {
			return err
		}
		var ups []string
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, "gang-gpu") {
				ups = append(ups, ev.Message)
			}
		}
		if len(ups) != 1 || !strings.Contains(ups[0], "size to 2 instead of 0") {
			return fmt.Errorf("events %q", ups)
		}
		return nil
	})

	// 24 more need 3 nodes; the group has room for 2.
	e.gang("gang", "big", 24)
	e.eventually(time.Minute, "NotTriggerScaleUp on every pod of big naming the gang", func() error {
		evs, err := cp.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "reason=NotTriggerScaleUp"})
		if err != nil {
			return err
		}
		pods := map[string]bool{}
		for _, ev := range evs.Items {
			if strings.HasPrefix(ev.InvolvedObject.Name, "big-") && strings.Contains(ev.Message, "PodGroup "+e.ns+"/big is a gang of minCount 24") &&
				strings.Contains(ev.Message, "max size 4 leaves room for 2") {
				pods[ev.InvolvedObject.Name] = true
			}
		}
		if len(pods) != 24 {
			return fmt.Errorf("%d of 24 pods have the event", len(pods))
		}
		return nil
	})
	e.consistently(5*time.Second, "no node for big", func() error {
		if n := len(e.groupNodes("gang-gpu")); n != 2 {
			return fmt.Errorf("%d nodes, want still 2", n)
		}
		return nil
	})

	// Offline is live: draxr simulate on the cluster refuses big as the
	// loop did.
	code, out, errOut := runDraxr(t, filepath.Join(bins, "draxr"), "simulate", "--kubeconfig", cp.AdminKubeconfig,
		"--node-group-config", groups, "-n", e.ns, "-o", "json", "--feature-gates=GenericWorkload=true", "--bypassed-scheduler-names=gang,volcano")
	if code != 0 {
		t.Fatalf("draxr simulate --kubeconfig: exit %d: %s", code, errOut)
	}
	var plan report.SimulateOutput
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, n := range plan.NoScaleUp {
		if strings.HasPrefix(n.Pod.Name, "big-") && n.Code == "GangDoesNotFit" && strings.Contains(n.Reason, "max size 4 leaves room for 2") {
			refused++
		}
	}
	if refused != 24 || len(plan.ScaleUps) != 0 {
		t.Errorf("draxr simulate refuses %d of big's 24 pods and plans %+v; want all refused, no scale-up, as the loop", refused, plan.ScaleUps)
	}

	// Volcano's gang (no Volcano runs: its pods stay pending, bypassed):
	// 8 pods of minMember 8 get one node of the two left.
	e.volcanoGang("vc", 8)
	e.eventually(time.Minute, "3 nodes", func() error {
		if n := len(e.groupNodes("gang-gpu")); n != 3 {
			return fmt.Errorf("%d nodes", n)
		}
		return nil
	})
}

// volcanoGang creates a Volcano PodGroup of minMember n and its n pods
// (schedulerName volcano, the group in Volcano's annotation).
func (e *env) volcanoGang(name string, n int) {
	e.t.Helper()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		e.t.Fatal(err)
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec":     map[string]any{"minMember": int64(n), "queue": "default"}}}
	if _, err := dyn.Resource(view.VolcanoPodGroupsResource()).Namespace(e.ns).Create(e.ctx, pg, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.gangPods(name, n, func(p *v1.Pod) {
		p.Spec.SchedulerName = gang.VolcanoScheduler
		p.Annotations = map[string]string{gang.VolcanoGroupAnnotation: name}
	})
}

// topologyGang is gang with the PodGroup required in one domain of key
// (spec.schedulingConstraints.topology, TopologyAwareWorkloadScheduling).
func (e *env) topologyGang(schedulerName, name string, n int, key string) {
	e.t.Helper()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(n)}},
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{
				Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}}}}
	created, err := cp.Client.SchedulingV1beta1().PodGroups(e.ns).Create(e.ctx, pg, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	// An API server without the gate drops the field: the test would
	// prove nothing.
	if c := created.Spec.SchedulingConstraints; c == nil || len(c.Topology) != 1 || c.Topology[0].Key != key {
		e.t.Fatalf("the API server dropped schedulingConstraints: %+v", c)
	}
	e.gangPods(name, n, func(p *v1.Pod) {
		p.Spec.SchedulerName = schedulerName
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	})
}

// A 1.37 rack gang live, with the scheduler's own TopologyPlacementGenerator
// (TopologyAwareWorkloadScheduling on in the API server, the scheduler and
// draxr-autoscaler). Racks c and d have one 8-GPU node each and cannot
// grow: 16 GPUs free, but in two racks. The scheduler leaves a gang of 16
// one-GPU pods required in one rack pending on them, and draxr adds no
// node there and says why (the loop and draxr simulate alike). With rack
// e's group, draxr simulate plans 2 nodes in rack e, the loop makes them,
// and the gang binds there.
func TestTopologyGangsLive(t *testing.T) {
	e := newEnvWithin(t, "topogang", 3*time.Minute)
	e.deleteOnCleanup(schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups"))
	e.class("topogang-gpu", e.driver, e.resource)
	const gates = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
	opts := schedulerOptions("topogang")
	opts.Args = []string{gates}
	stop, err := cp.StartScheduler(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rack := func(name, value string, min, max int) groupSpec {
		return groupSpec{name: name, min: min, max: max, draDevices: 8, labels: map[string]string{rackKey: value}}
	}
	split := e.nodeGroups(rack("topogang-c", "c", 1, 1), rack("topogang-d", "d", 1, 1))
	e.existingGroupNode(rack("topogang-c", "c", 1, 1))
	e.existingGroupNode(rack("topogang-d", "d", 1, 1))
	first := e.autoscaler(split, gates, "--bypassed-scheduler-names=topogang")
	e.eventually(time.Minute, "racks c and d's nodes Ready with their devices", func() error {
		return e.nodesReady(true, "topogang-c-0", "topogang-d-0")
	})

	e.topologyGang("topogang", "train", 16, rackKey)
	e.eventually(time.Minute, "the scheduler finds no rack for the gang and draxr says why", func() error {
		evs, err := cp.Client.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "reason=NotTriggerScaleUp"})
		if err != nil {
			return err
		}
		pods := map[string]bool{}
		for _, ev := range evs.Items {
			if strings.HasPrefix(ev.InvolvedObject.Name, "train-") && strings.Contains(ev.Message, "one domain of "+rackKey) &&
				strings.Contains(ev.Message, rackKey+"=c: 8 fit its 1 existing nodes") && strings.Contains(ev.Message, rackKey+"=d: 8 fit its 1 existing nodes") {
				pods[ev.InvolvedObject.Name] = true
			}
		}
		if len(pods) != 16 {
			return fmt.Errorf("%d of 16 pods have the event", len(pods))
		}
		return nil
	})
	// The scheduler tried one placement per rack and none holds 16.
	if pod := e.waitUnschedulable("train-0"); !strings.Contains(conditions(pod), "placements are available") {
		t.Errorf("train-0: %s; want the scheduler's placement refusal", conditions(pod))
	}
	e.consistently(5*time.Second, "the gang stays pending on two racks, no node added", func() error {
		if n := len(e.podsPerNode()); n != 0 {
			return fmt.Errorf("pods bound on %d nodes", n)
		}
		if r := e.racks(); r["c"] != 1 || r["d"] != 1 || len(r) != 2 {
			return fmt.Errorf("nodes per rack %v", r)
		}
		return nil
	})

	// Offline is live: draxr simulate refuses the gang as the loop did,
	// and with rack e's group plans its nodes there.
	simulate := func(groups string) report.SimulateOutput {
		t.Helper()
		code, out, errOut := runDraxr(t, filepath.Join(bins, "draxr"), "simulate", "--kubeconfig", cp.AdminKubeconfig,
			"--node-group-config", groups, "-n", e.ns, "-o", "json", gates, "--bypassed-scheduler-names=topogang")
		if code != 0 {
			t.Fatalf("draxr simulate --kubeconfig: exit %d: %s", code, errOut)
		}
		var plan report.SimulateOutput
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		return plan
	}
	plan := simulate(split)
	refused := 0
	for _, n := range plan.NoScaleUp {
		if strings.HasPrefix(n.Pod.Name, "train-") && n.Code == "TopologyDomainNotFound" && strings.Contains(n.Reason, rackKey+"=c: 8 fit its 1 existing nodes") {
			refused++
		}
	}
	if refused != 16 || len(plan.ScaleUps) != 0 {
		t.Errorf("draxr simulate refuses %d of 16 pods and plans %+v; want all refused (TopologyDomainNotFound), no scale-up, as the loop", refused, plan.ScaleUps)
	}
	withE := e.nodeGroups(rack("topogang-c", "c", 1, 1), rack("topogang-d", "d", 1, 1), rack("topogang-e", "e", 0, 2))
	plan = simulate(withE)
	if len(plan.ScaleUps) != 1 || plan.ScaleUps[0].NodeGroup != "topogang-e" || plan.ScaleUps[0].NewNodes != 2 ||
		plan.ScaleUps[0].Topology == nil || *plan.ScaleUps[0].Topology != (scaleup.Topology{Key: rackKey, Value: "e"}) {
		t.Fatalf("draxr simulate with rack e plans %+v, want topogang-e +2 in %s=e", plan.ScaleUps, rackKey)
	}

	// The loop with rack e's group does what simulate said. The gang's
	// pods have failed for a while, so the scheduler retries them after
	// its longest backoff (10s): a scale-down delay after the scale-up
	// (CA's default is 10 minutes) keeps the new, still empty nodes
	// until then.
	first.Stop(10 * time.Second)
	e.autoscaler(withE, gates, "--bypassed-scheduler-names=topogang", "--scale-down-delay-after-add=1m")
	perNode := e.waitPodsBound(16, 90*time.Second)
	if r := e.racks(); r["c"] != 1 || r["d"] != 1 || r["e"] != 2 {
		t.Errorf("nodes per rack %v, want c:1 d:1 e:2", r)
	}
	for node, n := range perNode {
		if !strings.HasPrefix(node, "topogang-e-") || n != 8 {
			t.Errorf("%d pods on %s; want 8 on each of rack e's 2 nodes (pods per node %v)", n, node, perNode)
		}
	}
}
