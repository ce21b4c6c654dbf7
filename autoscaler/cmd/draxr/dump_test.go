package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"draxr.dev/draxr/simulator/input"
)

// draxr dump writes the cluster as draxr reads it: planned from the dump
// with -f, it gives the plan its objects give, pods being bound
// included; CRDs the API server does not serve are skipped, each with a
// note.
func TestDumpPlansAsTheCluster(t *testing.T) {
	group, cluster, _ := strings.Cut(localDump(2), "\n---\n")
	// A pod with the volume ServiceAccount admission adds, which the read
	// leaves out, mounted.
	cluster += `---
apiVersion: v1
kind: Pod
metadata: {name: with-token, namespace: ml}
spec:
  serviceAccountName: default
  containers:
  - name: c
    image: busybox
    resources: {limits: {example.com/gpu: "1"}}
    volumeMounts: [{name: kube-api-access-x, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}]
  volumes:
  - name: kube-api-access-x
    projected: {sources: [{serviceAccountToken: {path: token}}]}
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
`
	groups := writeFile(t, "nodegroups.yaml", group)
	original := writeFile(t, "cluster.yaml", cluster)
	objs, err := input.LoadPaths([]string{original})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(apiObjects(objs)...)
	var out, notes bytes.Buffer
	if err := dumpCluster(context.Background(), client, nil, &out, &notes); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"podgroups.scheduling.volcano.sh", "provisioningrequests.autoscaling.x-k8s.io", "capacitybuffers.autoscaling.x-k8s.io"} {
		if !strings.Contains(notes.String(), "note: the API server does not serve "+kind+": skipped\n") {
			t.Errorf("stderr %q has no note for %s", notes.String(), kind)
		}
	}
	if !strings.HasPrefix(out.String(), "apiVersion: v1\nitems:\n") || !strings.HasSuffix(out.String(), "kind: List\n") {
		t.Errorf("dump is not one YAML List:\n%.300s", out.String())
	}
	dumped := writeFile(t, "dump.yaml", out.String())
	plan := func(path string) string {
		t.Helper()
		code, out, errOut := draxr(t, "simulate", "-o", "json", "-f", path, "-f", groups)
		if code != 0 {
			t.Fatalf("simulate -f %s: exit %d, stderr: %s", path, code, errOut)
		}
		return out
	}
	if got, want := plan(dumped), plan(original); got != want || !strings.Contains(got, `"newNodes": 4`) {
		t.Errorf("plan of the dump:\n%s\nplan of the cluster's objects:\n%s", got, want)
	}
}
