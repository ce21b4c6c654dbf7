package soak

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/test/soak/checker"
)

// The audit log is where the checker learns who removed a pod or a node:
// a record the tail misreads would leave those invariants nothing to fail
// on. The lines are the API server's JSON audit format, the second one
// written in two parts as a log being appended to is read.
func TestTailAuditFeedsTheChecker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	eviction := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"1","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/namespaces/soak/pods/p/eviction","verb":"create","user":{"username":"system:serviceaccount:kube-system:draxr-autoscaler"},` +
		`"objectRef":{"resource":"pods","namespace":"soak","name":"p","apiVersion":"v1","subresource":"eviction"},"responseStatus":{"metadata":{},"code":201}}` + "\n"
	nodeDelete := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"2","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/nodes/dra-a-0","verb":"delete","user":{"username":"admin"},` +
		`"objectRef":{"resource":"nodes","name":"dra-a-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}` + "\n"
	if err := os.WriteFile(path, []byte(eviction+nodeDelete[:40]), 0o600); err != nil {
		t.Fatal(err)
	}
	out := make(chan checker.Observation, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&observer{out: out}).tailAudit(ctx, path)

	next := func() *checker.Call {
		t.Helper()
		select {
		case o := <-out:
			if o.Kind != checker.APICall {
				t.Fatalf("observation kind %d, want APICall", o.Kind)
			}
			return o.Call
		case <-time.After(10 * time.Second):
			t.Fatal("no observation from the audit log")
			return nil
		}
	}
	want := checker.Call{User: "system:serviceaccount:kube-system:draxr-autoscaler", Verb: "create", Resource: "pods",
		Subresource: "eviction", Namespace: "soak", Name: "p", Code: 201}
	if got := next(); *got != want {
		t.Errorf("eviction read as %+v, want %+v", *got, want)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(nodeDelete[40:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want = checker.Call{User: "admin", Verb: "delete", Resource: "nodes", Name: "dra-a-0", Code: 200}
	if got := next(); *got != want {
		t.Errorf("node deletion read as %+v, want %+v", *got, want)
	}
}

// Every shape the churn makes is one the checker can weigh, and only
// the groups the setup says can hold it do.
func TestShapesHaveDemandAndAGroup(t *testing.T) {
	for _, s := range []string{"plugin-4", "draext-4", "claim-4", "mig-2", "cpu-0"} {
		sh, ok := parseShape(s)
		if !ok || sh.String() != s {
			t.Errorf("shape %q parses as %v, %v", s, sh, ok)
		}
	}
	fits := func(shape string) []string {
		var out []string
		d := demand(podWithShape(shape))
		for _, g := range groups() {
			c := capacity(g.name, true)
			ok := true
			for r, n := range d {
				if c[r] < n {
					ok = false
				}
			}
			if ok {
				out = append(out, g.name)
			}
		}
		return out
	}
	for shape, want := range map[string]int{"plugin-4": 3, "plugin-5": 1, "draext-4": 3, "draext-5": 2, "mig-2": 1, "mig-5": 0, "cpu-0": 7} {
		if got := fits(shape); len(got) != want {
			t.Errorf("shape %s fits %v, want %d groups", shape, got, want)
		}
	}
	if got := fits("unknown"); len(got) != 0 {
		t.Errorf("a pod that is not the soak's fits %v, want no group", got)
	}
}

func podWithShape(shape string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{shapeAnnotation: shape}}}
}
