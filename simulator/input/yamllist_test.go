package input

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/examples"
)

// asList writes documents as the items of one List, as kubectl does.
func asList(docs [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nitems:\n")
	for _, d := range docs {
		lines := strings.Split(strings.Trim(string(d), "\n"), "\n")
		for len(lines) > 1 && strings.HasPrefix(lines[0], "#") {
			lines = lines[1:] // a comment on the entry's line would hide the object
		}
		for i, line := range lines {
			switch {
			case i == 0:
				b.WriteString("- " + line)
			case line == "":
			default:
				b.WriteString("  " + line)
			}
			b.WriteByte('\n')
		}
	}
	b.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	return b.Bytes()
}

// testDocuments is every YAML document of the project's test inputs:
// kubectl dumps (managedFields, statuses, ephemeral containers), the
// built-in example, the golden scenarios and the generator's dump.
func testDocuments(t testing.TB) [][]byte {
	t.Helper()
	inputs := [][]byte{examples.Builtin, dumpYAML(3, 20)}
	files, _ := filepath.Glob("testdata/*.yaml")
	scenarios, _ := filepath.Glob("../offline/testdata/scenarios/*/input/*.yaml")
	for _, f := range append(files, scenarios...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, data)
	}
	var docs [][]byte
	for _, in := range inputs {
		for _, part := range splitYAML(in) {
			if !hasContent(part.data) {
				continue
			}
			docs = append(docs, part.data)
		}
	}
	return docs
}

// sameJSON compares two JSON texts as values (key order aside).
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	for _, x := range []struct {
		raw []byte
		v   *any
	}{{a, &va}, {b, &vb}} {
		dec := json.NewDecoder(bytes.NewReader(x.raw))
		dec.UseNumber()
		if err := dec.Decode(x.v); err != nil {
			t.Fatalf("%v: %s", err, x.raw)
		}
	}
	return reflect.DeepEqual(va, vb)
}

// TestConvertBlockListMatchesWhole: a List of every document of the test
// inputs (kubectl dumps, flow-style nodes, block scalars, the scenarios)
// converts item by item to the JSON go-yaml gives for the whole List.
func TestConvertBlockListMatchesWhole(t *testing.T) {
	docs := testDocuments(t)
	var plain [][]byte
	for _, d := range docs {
		if !bytes.ContainsAny(d, "&*!") {
			plain = append(plain, d)
		}
	}
	for name, data := range map[string][]byte{
		"every document":        asList(plain),
		"kubectl's dump":        must(os.ReadFile("testdata/dump.yaml")),
		"one item":              asList(plain[:1]),
		"the last 20 documents": asList(docs[len(docs)-20:]),
		"shell commands":        []byte("apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  spec:\n    containers:\n    - args:\n      - sh\n      - -c\n      - test -f /x && cp /y/*.txt /z!\n      name: c\nkind: List\n"),
	} {
		t.Run(name, func(t *testing.T) {
			got, tm, ok := convertBlockListFrom(data, 0)
			if !ok {
				t.Fatal("declined")
			}
			want, err := yaml.YAMLToJSONStrict(data)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, want) {
				t.Errorf("JSON differs:\n%s\nwant\n%s", got, want)
			}
			if tm == nil || tm.Kind != "List" || tm.APIVersion != "v1" {
				t.Errorf("type %+v, want v1 List", tm)
			}
		})
	}
	if len(plain) < 40 {
		t.Fatalf("only %d documents", len(plain))
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestConvertBlockListDeclines: what it cannot prove it converts like
// the whole document is left to the whole document.
func TestConvertBlockListDeclines(t *testing.T) {
	const item = "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p\n"
	for name, doc := range map[string]string{
		"anchor across items":   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  a: &x 1\n- apiVersion: v1\n  b: *x\n",
		"anchor in an item":     "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  a: &x 1\n  b: *x\n",
		"tag":                   "apiVersion: v1\nkind: List\nitems:\n- !!map {apiVersion: v1}\n",
		"comment at column 0":   "apiVersion: v1\nkind: List\nitems:\n" + item + "# note\n" + item,
		"items given twice":     "apiVersion: v1\nkind: List\nitems:\n" + item + "items:\n" + item,
		"flow items":            "apiVersion: v1\nkind: List\nitems: []\n",
		"no items":              "apiVersion: v1\nkind: List\nitems:\nmetadata: {}\n",
		"one-column indent":     "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n kind: Pod\n",
		"tab":                   "apiVersion: v1\nkind: List\nitems:\n" + item + "\t\n",
		"carriage return":       "apiVersion: v1\r\nkind: List\r\nitems:\r\n" + item,
		"bad YAML in an item":   "apiVersion: v1\nkind: List\nitems:\n" + item + "- a: b: c\n",
		"duplicate key":         "apiVersion: v1\nkind: List\nitems:\n- {a: 1, a: 2}\n",
		"duplicate head key":    "apiVersion: v1\nkind: List\nkind: List\nitems:\n" + item,
		"root sequence":         "- a\n- b\n",
		"flow item":             "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod}\n",
		"quoted key first":      "apiVersion: v1\nkind: List\nitems:\n- 'apiVersion': v1\n",
		"item under a head key": "apiVersion: v1\nfinalizers:\n- x\nitems:\n" + item,
	} {
		t.Run(name, func(t *testing.T) {
			if out, _, ok := convertBlockListFrom([]byte(doc), 0); ok {
				t.Errorf("converted %q to %s", doc, out)
			}
		})
	}
}

// FuzzConvertBlockList: whatever it converts, go-yaml converts whole to
// the same JSON. Run it longer with
// go test -fuzz FuzzConvertBlockList ./simulator/input/.
func FuzzConvertBlockList(f *testing.F) {
	docs := testDocuments(f)
	f.Add(asList(docs[:3]))
	f.Add(asList(docs[len(docs)-3:]))
	f.Add(must(os.ReadFile("testdata/dump.yaml")))
	f.Add([]byte("apiVersion: v1\nitems:\n- |\n  text\n- >-\n  folded\n  line\n- 'it''s'\n- \"a\\tb\"\n- null\n- \n- a\n  b\n- {a: 1,\n  b: [2,\n  3]}\n- k: a\n   b\n  l: |\n    x\n  m:\n  - 1\nkind: List\n"))
	f.Add([]byte("apiVersion: v1\nitems:\n- a: |\n    text\n  b: >-\n    folded\n    line\n  c: x\n    y\n  d: {p: 1,\n    q: [2,\n    3]}\n  e:\n  - 1\n  f: 'it''s\n    more'\n  g: |2\n      indented\n- h: 1\nkind: List\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, ok := convertBlockListFrom(data, 0)
		if !ok {
			return
		}
		want, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			t.Fatalf("converted what go-yaml refuses (%v):\n%s", err, data)
		}
		if !sameJSON(t, got, want) {
			t.Fatalf("JSON differs for\n%s\ngot  %s\nwant %s", data, got, want)
		}
	})
}
