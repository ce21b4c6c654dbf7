package offline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/offline"
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
			opts, err := loadOptions(filepath.Join(dir, "options.yaml"))
			if err != nil {
				t.Fatal(err)
			}
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
