package provisioning_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/offline"
	"draxr.dev/draxr/simulator/offline/scenario"
	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaleup"
)

// asRequest turns the pending pods into one ProvisioningRequest of class
// in their namespace: a PodTemplate and a podSet per distinct pod spec,
// in the order the scheduler's queue takes the pods (a request's pods
// share its creation time; their names keep the podSets' order).
func asRequest(t *testing.T, objs *input.Objects, class string) {
	t.Helper()
	counts := map[string]int32{}
	var order []string
	specs := map[string]v1.PodSpec{}
	ns := objs.PendingPods[0].Namespace
	for _, p := range scaleup.SortSchedulerQueue(objs.PendingPods) {
		if p.Namespace != ns {
			t.Skip("pending pods in several namespaces: a request has one")
		}
		data, err := json.Marshal(p.Spec)
		if err != nil {
			t.Fatal(err)
		}
		key := string(data)
		if counts[key] == 0 {
			order = append(order, key)
			specs[key] = p.Spec
		}
		counts[key]++
	}
	if len(order) > 32 {
		t.Skipf("%d kinds of pods: more than a request's 32 podSets", len(order))
	}
	if len(order) > 10 {
		t.Skipf("%d kinds of pods: podSet 10's pods would sort before podSet 2's", len(order))
	}
	pr := &prv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: "as-request", Namespace: ns, UID: "as-request"},
		Spec: prv1.ProvisioningRequestSpec{ProvisioningClassName: class}}
	for i, key := range order {
		name := fmt.Sprintf("set-%d", i)
		spec := specs[key]
		spec.NodeName = ""
		objs.PodTemplates = append(objs.PodTemplates, &v1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Template: v1.PodTemplateSpec{Spec: spec}})
		pr.Spec.PodSets = append(pr.Spec.PodSets, prv1.PodSet{PodTemplateRef: prv1.Reference{Name: name}, Count: counts[key]})
	}
	objs.ProvisioningRequests = []*prv1.ProvisioningRequest{pr}
	objs.PendingPods = nil
}

// scenariosDir holds draxr simulate's golden scenarios.
const scenariosDir = "../../simulator/offline/testdata/scenarios"

// A request's pods are planned as the same pods pending would be: on
// every golden scenario's shape where each pending pod gets room, an
// atomic request of those pods gets the same new nodes per group (or
// CapacityIsFound when existing nodes take them all), and a
// check-capacity request is found exactly when no node is needed.
func TestRequestsCountAsPods(t *testing.T) {
	dirs, err := os.ReadDir(scenariosDir)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, d := range dirs {
		t.Run(d.Name(), func(t *testing.T) {
			dir := filepath.Join(scenariosDir, d.Name())
			load := func() *input.Objects {
				objs, err := input.LoadPaths([]string{filepath.Join(dir, "input")})
				if err != nil {
					t.Fatal(err)
				}
				return objs
			}
			opts, err := scenario.Options(filepath.Join(dir, "options.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			opts.Requests = provisioning.OfflineStep("", provisioning.DefaultInitialBackoff)
			objs := load()
			if len(objs.PendingPods) == 0 {
				t.Skip("no pending pods")
			}
			res, err := offline.Simulate(context.Background(), objs, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Plan.NoScaleUp) > 0 || len(res.Plan.ScaleUps) > 1 {
				t.Skipf("%d pods get no room, %d groups grow: all or nothing differs by design", len(res.Plan.NoScaleUp), len(res.Plan.ScaleUps))
			}
			pods := map[string]int{}
			for _, su := range res.Plan.ScaleUps {
				pods[su.NodeGroup] += su.NewNodes
			}
			for _, class := range []string{provreq.BestEffortAtomic, provreq.CheckCapacity} {
				objs := load()
				asRequest(t, objs, class)
				got, err := offline.Simulate(context.Background(), objs, opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(got.ProvisioningRequests) != 1 {
					t.Fatalf("%s: %d reports", class, len(got.ProvisioningRequests))
				}
				r := got.ProvisioningRequests[0]
				nodes := map[string]int{}
				for _, su := range r.ScaleUp {
					nodes[su.NodeGroup] += su.NewNodes
				}
				wantReason := provreq.ReasonCapacityIsFound
				switch {
				case class == provreq.BestEffortAtomic && len(pods) > 0:
					wantReason = provreq.ReasonCapacityIsProvisioned
				case class == provreq.CheckCapacity && len(pods) > 0:
					wantReason, nodes = provreq.ReasonCapacityIsNotFound, pods
				}
				if r.Condition.Reason != wantReason || fmt.Sprint(nodes) != fmt.Sprint(pods) {
					t.Errorf("%s: %s %v (%s); as pending pods: %v", class, r.Condition.Reason, nodes, r.Condition.Message, pods)
				}
			}
			compared++
		})
	}
	// Shapes where pods go to several groups, or are in several
	// namespaces, are not one request's (all or nothing in one group).
	if compared < 7 {
		t.Errorf("compared %d scenarios, want at least 7", compared)
	}
}

// offlineDump: the group gpu of 8-GPU nodes (at most 4) with one node,
// gpu-0, whose 8 GPUs are free; a PodTemplate of one GPU; one pending
// pod of it; and requests created in the order given, with the status
// each carries.
func offlineDump(requests ...string) string {
	var b strings.Builder
	b.WriteString(fixtures.GPUGroupDump(4))
	b.WriteString(`---
apiVersion: v1
kind: PodTemplate
metadata: {name: one-gpu, namespace: ml}
template:
  spec:
    containers: [{name: c, image: busybox, resources: {limits: {example.com/gpu: "1"}}}]
`)
	b.WriteString(fixtures.PendingGPUPodDoc("pending", "{}"))
	for i, r := range requests {
		fmt.Fprintf(&b, "---\napiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\n"+
			"metadata: {name: %s, namespace: ml, uid: %s, creationTimestamp: \"2026-06-01T11:%02d:00Z\"}\n%s\n", strings.Fields(r)[0], strings.Fields(r)[0], i, r[strings.Index(r, "\n")+1:])
	}
	return b.String()
}

// request is one ProvisioningRequest of offlineDump: its name, then its
// spec (count GPUs of class) and status (YAML, may be empty).
func request(name, class string, count int, status string) string {
	return fmt.Sprintf("%s\nspec:\n  provisioningClassName: %s\n  podSets: [{podTemplateRef: {name: one-gpu}, count: %d}]\n%s", name, class, count, status)
}

// draxr simulate decides requests as the loop does over time while
// nothing else changes: one a loop, oldest first, on one simulation. A
// provisioned request holds its room, one in backoff waits, a finished
// old one is deleted; each decision sees the room the earlier took, an
// atomic request's new nodes included; the pending pods come last.
func TestOfflineStepIsTheLoopOverTime(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339) }
	objs, err := input.Parse([]byte(offlineDump(
		request("a-booked", provreq.CheckCapacity, 4, "status: {conditions: [{type: Provisioned, status: \"True\", reason: CapacityIsFound, message: m, lastTransitionTime: \""+at(time.Minute)+"\"}]}"),
		request("b-waits", provreq.CheckCapacity, 1, "status: {conditions: [{type: Provisioned, status: \"False\", reason: CapacityIsNotFound, message: m, lastTransitionTime: \""+at(10*time.Second)+"\"}]}"),
		request("c-fits", provreq.CheckCapacity, 4, ""),
		request("d-no-room", provreq.CheckCapacity, 1, ""),
		request("e-atomic", provreq.BestEffortAtomic, 10, ""),
		request("f-fits-new", provreq.CheckCapacity, 6, ""),
		request("g-finished", provreq.CheckCapacity, 1, "status: {conditions: [{type: Failed, status: \"True\", reason: CapacityIsNotFound, message: m, lastTransitionTime: \""+at(8*24*time.Hour)+"\"}]}"),
	)), "dump")
	if err != nil {
		t.Fatal(err)
	}
	res, err := offline.Simulate(context.Background(), objs, offline.Options{Now: now,
		Requests: provisioning.OfflineStep("", provisioning.DefaultInitialBackoff)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.ProvisioningRequests {
		got = append(got, fmt.Sprintf("%s %s=%s %s %v", r.Name, r.Condition.Type, r.Condition.Status, r.Condition.Reason, r.ScaleUp))
	}
	want := []string{
		"a-booked Provisioned=True CapacityIsFound []",
		"b-waits Provisioned=False CapacityIsNotFound []",
		"c-fits Provisioned=True CapacityIsFound []",
		"d-no-room Provisioned=False CapacityIsNotFound []",
		"e-atomic Provisioned=True CapacityIsProvisioned [{gpu 2 false}]",
		"f-fits-new Provisioned=True CapacityIsFound []",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// gpu-0 is held by a and c, the atomic request's two nodes by e and
	// f: the pending pod needs the group's third node.
	if su := res.Plan.ScaleUps; len(su) != 1 || su[0].NodeGroup != "gpu" || su[0].NewNodes != 1 || len(res.Plan.ExistingNodes) != 0 {
		t.Errorf("pending pod: scale-ups %+v, on existing nodes %+v; want gpu +1", su, res.Plan.ExistingNodes)
	}
}
