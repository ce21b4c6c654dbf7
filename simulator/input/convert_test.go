package input

import (
	"fmt"
	"strings"
	"testing"
)

// Documents are converted on several goroutines, in chunks; what comes out
// (objects, their order, errors with document and file line numbers) must
// be what a one-by-one reading gives, whatever chunk a document falls in.
func TestManyDocumentsKeepOrderAndErrors(t *testing.T) {
	podDoc := func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: p-%04d}\nspec: {containers: [{name: c, image: busybox}]}\n", i)
	}
	build := func(n int, bad map[int]string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			if i > 1 {
				b.WriteString("---\n")
			}
			if doc, ok := bad[i]; ok {
				b.WriteString(doc)
			} else {
				b.WriteString(podDoc(i))
			}
		}
		return b.String()
	}
	// Each good document is 4 lines plus its separator: document i starts
	// on line 5*(i-1)+1 of the file, after its "---" on the line before.
	cases := []struct {
		name     string
		docs     int
		bad      map[int]string
		wantErrs []string // in this order
	}{
		{name: "fewer documents than a chunk", docs: 5},
		{name: "many chunks", docs: 10*yamlChunk + 7},
		{
			name: "errors in several chunks", docs: 3*yamlChunk + 1,
			bad: map[int]string{
				2:               "kind: Pod\n  metadata: x: y\n",
				yamlChunk + 1:   "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nmetadata: {name: b}\n",
				3*yamlChunk + 1: "apiVersion: v1\nkind: Pod\nmetadata: {name: nimage}\nspec: {containers: [{name: c}]}\n",
			},
			wantErrs: []string{
				"big.yaml: document 2: malformed YAML: yaml: line 7: mapping values",
				fmt.Sprintf("big.yaml: document %d: malformed YAML", yamlChunk+1),
				fmt.Sprintf("big.yaml: document %d: Pod default/nimage: spec.containers[0].image: Required value", 3*yamlChunk+1),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse([]byte(build(tc.docs, tc.bad)), "big.yaml")
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("Parse accepted the file, want errors %q", tc.wantErrs)
				}
				msg, at := err.Error(), 0
				for _, want := range tc.wantErrs {
					i := strings.Index(msg[at:], want)
					if i < 0 {
						t.Fatalf("error\n%s\nlacks, after what came before, %q", msg, want)
					}
					at += i + len(want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.PendingPods) != tc.docs {
				t.Fatalf("%d pods, want %d", len(objs.PendingPods), tc.docs)
			}
			for i, p := range objs.PendingPods {
				if want := fmt.Sprintf("p-%04d", i+1); p.Name != want {
					t.Fatalf("pod %d is %s, want %s: documents out of order", i, p.Name, want)
				}
			}
		})
	}
}
