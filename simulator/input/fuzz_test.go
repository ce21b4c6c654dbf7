package input

import (
	"os"
	"strings"
	"testing"

	"draxr.dev/draxr/simulator/examples"
)

// FuzzParse: whatever the bytes, Parse returns objects or an error naming
// the source; it never panics. `go test` runs the seeds; run it longer with
// go test -fuzz FuzzParse ./simulator/input/.
func FuzzParse(f *testing.F) {
	f.Add(examples.Builtin, "builtin.yaml")
	for _, name := range []string{"testdata/dump.yaml", "testdata/debugged-pod.yaml"} {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data, "dump.yaml")
		}
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}]}`), "list.json")
	f.Add([]byte("a: &a [*a, *a]\n"), "alias.yaml")
	f.Add([]byte("apiVersion: draxr.dev/v1alpha1\nkind: NodeGroup\nmetadata: {name: g}\nspec: {minSize: 3, maxSize: 1}\n"), "ng.yaml")
	// Mutated replica counts would spend each run expanding thousands of
	// pods; the fuzzer looks for panics, not throughput.
	opts := Options{MaxPodsPerWorkload: 100}
	f.Fuzz(func(t *testing.T, data []byte, source string) {
		if source == "" {
			source = "fuzz.yaml"
		}
		objs, err := opts.Parse(data, source)
		if err != nil {
			if !strings.Contains(err.Error(), source) {
				t.Fatalf("error does not name the source %q: %v", source, err)
			}
			return
		}
		if objs == nil {
			t.Fatal("no objects and no error")
		}
	})
}
