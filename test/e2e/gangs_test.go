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
