package input

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/examples"
)

// checkBlockYAML fails t unless the fast reader either declines data or
// gives exactly go-yaml's bytes; it returns whether it accepted. reuse,
// when not nil, is a converter that read other documents before.
func checkBlockYAML(t testing.TB, data []byte, reuse ...*blockConverter) bool {
	t.Helper()
	c := &blockConverter{}
	if len(reuse) > 0 {
		c = reuse[0]
	}
	fast, tm, ok := c.convert(data)
	if !ok {
		return false
	}
	slow, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		t.Fatalf("the fast reader accepted what go-yaml rejects (%v):\n%s\nfast: %s", err, data, fast)
	}
	if !bytes.Equal(fast, slow) {
		t.Fatalf("the fast reader and go-yaml disagree on\n%s\nfast:    %s\ngo-yaml: %s", data, fast, slow)
	}
	if tm != nil {
		if want, ok := peekTypeMeta(slow); !ok || *tm != want {
			t.Fatalf("the fast reader read apiVersion and kind %+v from\n%s\nJSON gives %+v (ok=%v)", *tm, data, want, ok)
		}
	}
	return true
}

func TestBlockYAMLMatchesGoYAML(t *testing.T) {
	cases := []struct {
		name   string
		doc    string
		accept bool // whether the fast reader must take it (else go-yaml does)
	}{
		{"kubectl pod", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  labels:\n    app.kubernetes.io/name: web\n  ownerReferences:\n  - apiVersion: apps/v1\n    kind: ReplicaSet\n    controller: true\n    name: web\nspec:\n  containers:\n  - image: registry.example/web:1.0\n    name: app\n    resources:\n      requests:\n        cpu: \"1\"\n        memory: 256Mi\n", true},
		{"unsorted keys are sorted", "kind: Pod\napiVersion: v1\nmetadata:\n  namespace: a\n  name: b\n", true},
		{"indented sequence", "a:\n    - 1\n    - -2\n    - x\nb: 0\n", true},
		{"nested items", "a:\n- - x\n", false},
		{"item mapping, extra spaces", "a:\n-   k: v\n    l: w\n- k: 2\n", true},
		{"empty values", "a:\nb: {}\nc: []\nd:\n- \n-\n", true},
		{"quoted", "a: 'it''s'\nb: \"q\\\"\\\\\\n\\t<&>\"\n'c d': \"\"\n", true},
		{"comment lines", "# top\na: 1\n  # inside\nb: 2\n", true},
		{"quantities and addresses", "a: 100m\nb: 1.5Gi\nc: 10.0.0.1\nd: 2E\n", true},
		{"true false null", "a: true\nb: false\nc: null\n", true},
		{"path", "a: /var/lib/x\n", true},
		{"spaces inside a plain scalar", "a: one  two three\n", true},
		// go-yaml's reading differs from a string's, or may: declined.
		{"yes", "a: yes\n", false},
		{"y key", "y: 1\n", false},
		{"True", "a: True\n", false},
		{"tilde", "a: ~\n", false},
		{"float", "a: 1.5\n", false},
		{"exponent", "a: 1e3\n", false},
		{"octal", "a: 010\n", false},
		{"hex", "a: 0x1f\n", false},
		{"minus zero", "a: -0\n", false},
		{"underscore", "a: 1_000\n", false},
		{"version", "a: 1.2.3\n", true},
		{"timestamp", "a: 2026-01-01T00:00:00Z\nb: 2026-01-01\n", true},
		{"uid", "uid: 10000000-0000-0000-0000-000000000001\n", true},
		{"binary", "a: 0b101\nb: -0b1\n", false},
		{"infinity", "a: -.inf\n", false},
		{"plus sign", "a: +1\n", false},
		{"flow mapping", "a: {b: c}\n", false},
		{"block scalar", "a: |\n  x\n", false},
		{"anchor", "a: &x 1\nb: *x\n", false},
		{"tag", "a: !!str 1\n", false},
		{"trailing comment", "a: 1 # one\n", false},
		{"tab", "a:\t1\n", false},
		{"carriage return", "a: 1\r\n", false},
		{"non-ASCII", "a: é\n", false},
		{"continued plain scalar", "a: one\n  two\n", false},
		{"unclosed quote", "a: \"one\n  two\"\n", false},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", false},
		{"duplicate key in order", "a: 1\na: 1\n", false},
		{"bad indentation", "a:\n    b: 1\n  c: 2\n", false},
		{"root indented", "  a: 1\n", false},
		{"mapping value in a plain scalar", "a: b: c\n", false},
		{"scalar document", "hello\n", false},
		{"item after keys", "a: 1\n- 2\n", false},
		{"slash escape", "a: \"\\/\"\n", false},
		// managedFields, as `kubectl get -o yaml --show-managed-fields` writes them.
		{"managed fields", "managedFields:\n- fieldsV1:\n    f:metadata:\n      f:labels:\n        .: {}\n        f:app: {}\n    f:status:\n      f:conditions:\n        k:{\"type\":\"Ready\"}:\n          .: {}\n          f:status: {}\n  manager: kubelet\n", true},
		{"colon inside a key", "a:b: c\nf:x:y:\n  z: 1\n", true},
		{"key ends at the first colon and space", "a: b:c\n", true},
		{"flow characters inside a key", "k:[1,2]: x\nv:\"a\": z\n", true},
		{"dot key", ".: 1\n", true},
		{"dot-first key", ".a: 1\n", false},
		{"flow character first", "{a}: 1\n", false},
		{"space inside a key", "a b: 1\n", false},
		{"yes key with a colon after", "yes:x: 1\n", true},
		{"flags and expressions", "args:\n- --config=/etc/x.conf\n- --name=$(NODE_NAME)\nexpression: device.driver == \"gpu.example.com\" && x['a'] > 1\n", true},
		{"inner indicators", "a: b!c&d*e|f>g?h%i@j`k\\l,m[n]{o}'p\"q\nb: x - y ? z\n", true},
		{"flag without a letter", "a: --1\nb: ---\n", false},
		{"short flags", "command:\n- sh\n- -c\n- -Xmx4g\np: -e5\nq: -inf\nr: -y\n", true},
		{"comment after a space", "a: b #c\n", false},
		{"key too long for YAML", strings.Repeat("k", 1025) + ": 0\n", false},
		{"quoted key too long for YAML", "\"" + strings.Repeat("k", 1023) + "\": 0\n", false},
		{"long key", strings.Repeat("k", 1000) + ": 0\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkBlockYAML(t, []byte(tc.doc)); got != tc.accept {
				t.Fatalf("fast reader accepted=%v, want %v for\n%s", got, tc.accept, tc.doc)
			}
		})
	}
}

// The dump layout `draxr simulate -f` is measured on must take the fast
// path, or the benchmark measures go-yaml.
func TestBlockYAMLTakesDumpPods(t *testing.T) {
	parts := splitYAML(dumpYAML(3, 20))
	accepted := 0
	for _, p := range parts {
		if checkBlockYAML(t, p.data) {
			accepted++
		}
	}
	// The NodeGroup and nodes use flow mappings; every pod is block style.
	if accepted < 20 {
		t.Fatalf("fast reader took %d of %d documents, want all 20 pods", accepted, len(parts))
	}
}

// A dump written by `kubectl get -o yaml --show-managed-fields` (the
// testdata List: managedFields with "f:", "k:{...}" and "." keys, nulls,
// single-quoted messages) takes the fast path whole.
func TestBlockYAMLTakesKubectlDump(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "dump.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("managedFields:")) {
		t.Fatal("testdata/dump.yaml has no managedFields: the test would not test them")
	}
	if !checkBlockYAML(t, raw) {
		t.Fatal("the fast reader declined testdata/dump.yaml; go-yaml reads it")
	}
}

// Random block documents built from scalars and keys chosen to sit on
// go-yaml's edges (booleans, numbers in every notation, indicators), in
// both sequence styles and two indentations.
func TestBlockYAMLRandomDocuments(t *testing.T) {
	scalars := []string{
		"x", "web-1", "y", "Y", "yes", "No", "on", "OFF", "true", "True", "false", "null", "NULL", "~",
		"0", "-0", "7", "-12", "010", "0x1F", "0o7", "0b1", "1_000", "1.5", ".5", "1.", "1e3", "1E3", "-1.5e-3", ".inf", "-.Inf", ".nan",
		"123456789012345678", "1234567890123456789", "9223372036854775808",
		"256Mi", "1.5Gi", "100m", "2E", "1e", "10.0.0.1", "1.2.3", "2026-01-01", "2026-01-01T00:00:00Z", "12:30",
		"/var/lib", "a b", "a  b", "a: b", "a #b", "a#b", "a:b", "-a", "- a", "?a", "@a", "%a", "a,b", "[a]", "{}", "[]", "{a: b}",
		"'q'", "'it''s'", "\"d\"", "\"a\\tb\"", "\"<&>\"", "\"\\x41\"", "''", "\"\"", "<<", "=", "a=b", "(x)",
		"--config=/x", "--", "---", "--1", "-- a", "--y", "-c", "-Xmx4g", "-e5", "-inf", "-Inf", "-n", "-y", "-0x1", "-.5", "$(X)", "a == \"b\"", "a!b", "a *b", "a &b", "a 'b'", "a\\b", "a`b",
		"a|b", "a ? b", "a - b", "a, b", "a]", "a}", "x: y", "a #", "a\"", "1\"", "1!", "-1a", "/a b", "yes!", "n'", "~a",
	}
	keys := []string{"a", "b", "kind", "apiVersion", "y", "on", "No", "1", "k8s.io/name", "a-b", "'q'", "\"d\"", "<<", "a b", "-k",
		"f:spec", ".", ".a", "k:{\"type\":\"Ready\"}", "v:\"x\"", "a:b", "a:", "y:n", "k:[1,2]", "a,b", "a#b", "{a}", "a{",
		"a!", "a&b", "a*", "a|b", "a>b", "a?", "a'b", "a\\b", "a`b", "--k", "a%", "a@b"}
	rng := rand.New(rand.NewPCG(1, 2))
	// Half the scalars come from the first nine, which the fast reader
	// takes, so that whole documents are often taken.
	scalar := func() string {
		if rng.IntN(2) == 0 {
			return []string{"x", "web-1", "0", "7", "-12", "256Mi", "10.0.0.1", "/var/lib", "'q'"}[rng.IntN(9)]
		}
		return scalars[rng.IntN(len(scalars))]
	}
	pad := func(n int) string { return strings.Repeat(" ", n) }
	var node func(b *strings.Builder, indent, step, depth int)
	var mappingEntries func(b *strings.Builder, indent, step, depth int, first string)
	value := func(b *strings.Builder, keyIndent, step, depth int) {
		switch r := rng.IntN(4); {
		case depth > 3 || r < 2:
			b.WriteString(" " + scalar() + "\n")
		case r == 2:
			b.WriteString("\n")
			node(b, keyIndent+step, step, depth+1)
		default: // a sequence at the key's own indentation
			b.WriteString("\n")
			for n := 1 + rng.IntN(3); n > 0; n-- {
				b.WriteString(pad(keyIndent) + "- " + scalar() + "\n")
			}
		}
	}
	mappingEntries = func(b *strings.Builder, indent, step, depth int, first string) {
		for i, n := 0, 1+rng.IntN(4); i < n; i++ {
			if i == 0 {
				b.WriteString(first)
			} else {
				b.WriteString(pad(indent))
			}
			b.WriteString(keys[rng.IntN(len(keys))] + ":")
			value(b, indent, step, depth)
		}
	}
	node = func(b *strings.Builder, indent, step, depth int) {
		if rng.IntN(2) == 0 {
			mappingEntries(b, indent, step, depth, pad(indent))
			return
		}
		for n := 1 + rng.IntN(3); n > 0; n-- {
			switch rng.IntN(3) {
			case 0:
				b.WriteString(pad(indent) + "- " + scalar() + "\n")
			case 1:
				mappingEntries(b, indent+2, step, depth+1, pad(indent)+"- ")
			default:
				b.WriteString(pad(indent) + "-\n")
				if depth < 3 {
					node(b, indent+step, step, depth+1)
				}
			}
		}
	}
	accepted := 0
	const docs = 20000
	var reused blockConverter // state must not leak from one document to the next
	for i := 0; i < docs; i++ {
		var b strings.Builder
		mappingEntries(&b, 0, 2+2*rng.IntN(2), 0, "")
		if checkBlockYAML(t, []byte(b.String()), &reused) {
			accepted++
		}
	}
	// Most documents hold some scalar go-yaml reads otherwise; enough
	// must be taken that the comparison means something.
	if accepted < docs/50 {
		t.Fatalf("fast reader took only %d of %d random documents", accepted, docs)
	}
	t.Logf("fast reader took %d of %d random documents", accepted, docs)
}

// Byte-level mutations of real documents: whatever the fast reader takes,
// go-yaml reads the same.
func TestBlockYAMLMutations(t *testing.T) {
	var seeds [][]byte
	for _, p := range splitYAML(examples.Builtin) {
		seeds = append(seeds, p.data)
	}
	for _, p := range splitYAML(dumpYAML(1, 3)) {
		seeds = append(seeds, p.data)
	}
	if data, err := os.ReadFile("testdata/dump.yaml"); err == nil {
		for _, p := range splitYAML(data) {
			seeds = append(seeds, p.data)
		}
	}
	alphabet := []byte(" -:#'\"\n{}[]yn01.xe\\&*!|>")
	rng := rand.New(rand.NewPCG(3, 4))
	accepted := 0
	var reused blockConverter
	for i := 0; i < 30000; i++ {
		doc := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for m := 1 + rng.IntN(3); m > 0 && len(doc) > 0; m-- {
			at := rng.IntN(len(doc))
			switch rng.IntN(3) {
			case 0: // replace
				doc[at] = alphabet[rng.IntN(len(alphabet))]
			case 1: // insert
				doc = append(doc[:at], append([]byte{alphabet[rng.IntN(len(alphabet))]}, doc[at:]...)...)
			default: // delete
				doc = append(doc[:at], doc[at+1:]...)
			}
		}
		if checkBlockYAML(t, doc, &reused) {
			accepted++
		}
	}
	if accepted < 1000 {
		t.Fatalf("fast reader took only %d mutated documents", accepted)
	}
	t.Logf("fast reader took %d of 30000 mutated documents", accepted)
}

func FuzzBlockYAML(f *testing.F) {
	for _, p := range splitYAML(dumpYAML(1, 2)) {
		f.Add(p.data)
	}
	f.Add([]byte("a:\n- b: 1\n  c:\n  - d\n"))
	f.Fuzz(func(t *testing.T, data []byte) { checkBlockYAML(t, data) })
}

func ExampleblockYAMLToJSON() {
	out, ok := blockYAMLToJSON([]byte("kind: Pod\napiVersion: v1\nmetadata:\n  name: web\n"))
	fmt.Println(string(out), ok)
	// Output: {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"}} true
}

// TestBlockYAMLDeclinesDeepNesting: go-yaml refuses more than 10,000
// indentation levels; the fast reader leaves deep nesting to it.
func TestBlockYAMLDeclinesDeepNesting(t *testing.T) {
	nested := func(n int) []byte {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(strings.Repeat(" ", i) + "a:\n")
		}
		b.WriteString(strings.Repeat(" ", n) + "b: 1\n")
		return []byte(b.String())
	}
	shallow := nested(maxBlockDepth - 2)
	got, ok := blockYAMLToJSON(shallow)
	want, err := yaml.YAMLToJSONStrict(shallow)
	if !ok || err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%d levels: fast reader ok=%v, go-yaml error %v; outputs equal: %v", maxBlockDepth-2, ok, err, bytes.Equal(got, want))
	}
	for _, n := range []int{maxBlockDepth + 1, 10001} {
		if _, ok := blockYAMLToJSON(nested(n)); ok {
			t.Errorf("%d levels: the fast reader took it", n)
		}
	}
}
