package input

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

const rsPodTemplate = `{metadata: {labels: {app: w, pod-template-hash: 5d4f8}}, spec: {containers: [{name: c, image: x}]}}`

func deployment(replicas int) string {
	return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ml, uid: d-uid}\nspec: {replicas: %d, selector: {matchLabels: {app: w}}, template: %s}\n", replicas, rsPodTemplate)
}

func replicaSet(replicas int) string {
	return fmt.Sprintf("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-5d4f8, namespace: ml, uid: rs-uid, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: d-uid, controller: true}]}\nspec: {replicas: %d, selector: {matchLabels: {app: w}}, template: %s}\n", replicas, rsPodTemplate)
}

func rsPod(name, node string) string {
	nodeName := ""
	if node != "" {
		nodeName = "nodeName: " + node + ", "
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ml, labels: {app: w, pod-template-hash: 5d4f8}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d4f8, uid: rs-uid, controller: true}]}\nspec: {%scontainers: [{name: c, image: x}]}\n", name, nodeName)
}

func stsPod(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ml, labels: {app: w}, ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: sts-uid, controller: true}]}\nspec: {nodeName: n1, containers: [{name: c, image: x}]}\n", name)
}

const statefulSet = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: ml, uid: sts-uid}\nspec: {replicas: 3, serviceName: db, selector: {matchLabels: {app: w}}, template: {metadata: {labels: {app: w}}, spec: {containers: [{name: c, image: x}]}}}\n"

// A dump with a workload and the pods its controllers made plans only the
// pods still missing.
func TestWorkloadsAreNotCountedTwice(t *testing.T) {
	tests := []struct {
		name        string
		docs        []string
		wantPending int
		wantNames   string // sorted pending pod names matching, "" to skip
	}{
		{name: "Deployment alone expands", docs: []string{deployment(3)}, wantPending: 3},
		{name: "Deployment, ReplicaSet and all pods running", wantPending: 0,
			docs: []string{deployment(3), replicaSet(3), rsPod("web-5d4f8-a", "n1"), rsPod("web-5d4f8-b", "n1"), rsPod("web-5d4f8-c", "n1")}},
		{name: "pods first, then the workloads", wantPending: 0,
			docs: []string{rsPod("web-5d4f8-a", "n1"), rsPod("web-5d4f8-b", "n1"), rsPod("web-5d4f8-c", "n1"), replicaSet(3), deployment(3)}},
		{name: "ReplicaSet with one pod missing", wantPending: 1,
			docs: []string{deployment(3), replicaSet(3), rsPod("web-5d4f8-a", "n1"), rsPod("web-5d4f8-b", "n1")}},
		{name: "pending pod of the ReplicaSet is itself the pending one", wantPending: 1, wantNames: "web-5d4f8-c",
			docs: []string{replicaSet(3), rsPod("web-5d4f8-a", "n1"), rsPod("web-5d4f8-b", "n1"), rsPod("web-5d4f8-c", "")}},
		{name: "Deployment and its pods without the ReplicaSet", wantPending: 3,
			docs: []string{deployment(5), rsPod("web-5d4f8-a", "n1"), rsPod("web-5d4f8-b", "n1")}},
		{name: "more pods than replicas", wantPending: 0,
			docs: []string{replicaSet(1), rsPod("web-5d4f8-a", "n1"), rsPod("web-5d4f8-b", "n1")}},
		{name: "StatefulSet with its first ordinal running", wantPending: 2, wantNames: "db-1 db-2",
			docs: []string{statefulSet, stsPod("db-0")}},
		{name: "StatefulSet after its running ordinal", wantPending: 2, wantNames: "db-0 db-2",
			docs: []string{stsPod("db-1"), statefulSet}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse([]byte(strings.Join(tc.docs, "---\n")), "dump.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range o.PendingPods {
				names = append(names, p.Name)
			}
			sort.Strings(names)
			if len(names) != tc.wantPending {
				t.Fatalf("pending pods %v, want %d", names, tc.wantPending)
			}
			if tc.wantNames != "" && strings.Join(names, " ") != tc.wantNames {
				t.Errorf("pending pods %v, want %s", names, tc.wantNames)
			}
		})
	}
}

// The same split over two files, merged by LoadPaths' path (Merge, then
// reconcile), gives the same answer.
func TestWorkloadsReconciledAcrossFiles(t *testing.T) {
	a, err := Parse([]byte(deployment(3)+"---\n"+replicaSet(3)), "workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(rsPod("web-5d4f8-a", "n1")+"---\n"+rsPod("web-5d4f8-b", "n1")), "pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := &Objects{}
	for _, o := range []*Objects{a, b} {
		if err := out.Merge(o); err != nil {
			t.Fatal(err)
		}
	}
	out.reconcileWorkloads()
	out.reconcileWorkloads() // twice changes nothing
	if len(out.PendingPods) != 1 {
		t.Fatalf("pending pods %d, want 1 (3 replicas, 2 running)", len(out.PendingPods))
	}
}

// Namespaces are accepted and dropped; DaemonSets are kept, not expanded.
func TestNamespaceAndDaemonSetKinds(t *testing.T) {
	src := "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\n" +
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: mon, namespace: kube-system}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n"
	o, err := Parse([]byte(src), "dump.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.DaemonSets) != 1 || o.DaemonSets[0].Name != "mon" || len(o.PendingPods) != 0 {
		t.Fatalf("daemonSets %d, pending %d; want the DaemonSet kept and no pods", len(o.DaemonSets), len(o.PendingPods))
	}
	_, err = Parse([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: Bad_Name}\n"), "dump.yaml")
	if err == nil || !strings.Contains(err.Error(), "Namespace Bad_Name") {
		t.Fatalf("bad namespace error = %v, want it to name Namespace Bad_Name", err)
	}
}
