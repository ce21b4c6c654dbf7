package input

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestInputHygiene(t *testing.T) {
	long := strings.Repeat("a", 5<<20)
	tests := []struct {
		name, file, src string
		want            []string
		maxLen          int // the whole error stays shorter than this
	}{
		{name: "JSON then garbage in a YAML file", file: "dump.yaml",
			src:  `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}` + "\ngarbage here\n",
			want: []string{`dump.yaml: document 1: content after the JSON document: "garbage here"`}},
		{name: "JSON then garbage on one line", file: "dump.yaml",
			src:  `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}} xx`,
			want: []string{"dump.yaml: document 1: content after the JSON document"}},
		{name: "JSON then garbage in a JSON file", file: "dump.json",
			src:  `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}} xx`,
			want: []string{"dump.json: document 2: malformed JSON"}},
		{name: "a 5 MB name is quoted short", file: "dump.yaml",
			src:    "apiVersion: v1\nkind: Node\nmetadata: {name: " + long + "}\n",
			want:   []string{"Node aaaa", "... (5242880 bytes)"},
			maxLen: 2000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), tc.file)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", quoteShort(err.Error()), w)
				}
			}
			if tc.maxLen > 0 && len(err.Error()) > tc.maxLen {
				t.Errorf("error is %d bytes, want at most %d: %s", len(err.Error()), tc.maxLen, quoteShort(err.Error()))
			}
		})
	}
	// JSON followed by a comment and YAML flow style stay valid.
	for _, ok := range []string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n1"}}` + "\n# trailing comment\n",
		"{apiVersion: v1, kind: Namespace, metadata: {name: n2}}\n",
	} {
		if _, err := Parse([]byte(ok), "ok.yaml"); err != nil {
			t.Errorf("Parse(%q) = %v, want accepted", ok, err)
		}
	}
}

func TestMaxPodsBoundsAllWorkloads(t *testing.T) {
	rs := func(name string, n int) string {
		return "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: " + name + "}\nspec: {replicas: " + itoa(n) + ", selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n"
	}
	if _, err := (Options{MaxPods: 10}).Parse([]byte(rs("a", 10)), "ok.yaml"); err != nil {
		t.Fatalf("10 pods within --max-pods 10: %v", err)
	}
	_, err := (Options{MaxPods: 10}).Parse([]byte(rs("a", 6)+"---\n"+rs("b", 6)), "two.yaml")
	if err == nil || !strings.Contains(err.Error(), "two.yaml: document 2: ReplicaSet default/b: 6 more pods exceed the limit on pods expanded from workloads (--max-pods") {
		t.Fatalf("error = %v, want the second ReplicaSet refused by --max-pods", err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{"a.yaml": rs("a", 6), "b.yaml": rs("b", 6)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := (Options{MaxPods: 10}).LoadPaths([]string{dir}); err == nil || !strings.Contains(err.Error(), "b.yaml: document 1: ReplicaSet default/b: 6 more pods") {
		t.Fatalf("across files: error = %v, want b.yaml refused", err)
	}
	if _, err := (Options{MaxPods: 12}).LoadPaths([]string{dir}); err != nil {
		t.Fatalf("12 pods within --max-pods 12: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
