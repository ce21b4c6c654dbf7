package input

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// podDocuments returns the JSON of every Pod, and of every workload's pod
// template as the pods it makes, in the project's test inputs
// (testDocuments).
func podDocuments(t testing.TB) [][]byte {
	t.Helper()
	var pods [][]byte
	for _, data := range testDocuments(t) {
		raw, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			t.Fatalf("%v:\n%s", err, data)
		}
		var doc struct {
			Items []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(raw, &doc) != nil {
			continue
		}
		for _, item := range append([]json.RawMessage{raw}, doc.Items...) {
			var obj struct {
				Kind string `json:"kind"`
				Spec struct {
					Template map[string]json.RawMessage `json:"template"`
				} `json:"spec"`
			}
			if json.Unmarshal(item, &obj) != nil {
				continue
			}
			switch {
			case obj.Kind == "Pod":
				pods = append(pods, item)
			case obj.Spec.Template != nil && strings.Contains("Deployment ReplicaSet StatefulSet Job DaemonSet", obj.Kind):
				obj.Spec.Template["apiVersion"], obj.Spec.Template["kind"] = json.RawMessage(`"v1"`), json.RawMessage(`"Pod"`)
				pod, err := json.Marshal(obj.Spec.Template)
				if err != nil {
					t.Fatal(err)
				}
				pods = append(pods, pod)
			}
		}
	}
	if len(pods) < 40 {
		t.Fatalf("only %d pods in the test inputs", len(pods))
	}
	return pods
}

// TestDecodeStrictFastTakesEveryPod: every pod of the test inputs is
// decoded by the fast path (a fallback would be silent and slow), into
// the object decodeStrict makes.
func TestDecodeStrictFastTakesEveryPod(t *testing.T) {
	for i, raw := range podDocuments(t) {
		fast := &v1.Pod{}
		if err := decodeV2(raw, fast); err != nil {
			t.Errorf("pod %d: encoding/json/v2 refused it: %v\n%s", i, err, raw)
			continue
		}
		strict := &v1.Pod{}
		if err := decodeStrict(raw, strict); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Errorf("pod %d %s: decoded differently:\nv2:     %+v\nstrict: %+v", i, strict.Name, fast, strict)
		}
	}
}

// TestDecodeStrictFastErrors: what v2 refuses is reported in
// decodeStrict's words, field paths included.
func TestDecodeStrictFastErrors(t *testing.T) {
	const head = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},`
	for _, tt := range []struct{ name, raw, want string }{
		{"unknown field", head + `"spec":{"containers":[{"name":"c","image":"x"}],"colour":"red"}}`, `unknown field "spec.colour"`},
		{"case mismatch", head + `"spec":{"Containers":[{"name":"c","image":"x"}]}}`, `unknown field "spec.Containers"`},
		{"duplicate field", head + `"spec":{"nodeName":"a","nodeName":"b"}}`, `duplicate field "spec.nodeName"`},
		{"wrong type", head + `"spec":{"containers":"nginx"}}`, "spec.containers of type []v1.Container"},
		{"bad quantity", head + `"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]}}`,
			`spec.containers[0].resources.requests[cpu]: invalid value "lots"`},
		{"fraction into an integer", head + `"spec":{"priority":1.5}}`, "spec.priority of type int32"},
		{"out of range", head + `"spec":{"priority":3000000000}}`, "spec.priority of type int32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeStrictFast([]byte(tt.raw), &v1.Pod{})
			want := decodeStrict([]byte(tt.raw), &v1.Pod{})
			if got == nil || want == nil || got.Error() != want.Error() {
				t.Fatalf("error %v, want decodeStrict's %v", got, want)
			}
			if !strings.Contains(got.Error(), tt.want) {
				t.Errorf("error %q does not say %q", got, tt.want)
			}
		})
	}
}

// TestDecodeStrictFastFallsBackClean: a document v2 refuses half-way
// leaves nothing of v2's partial decoding in the object.
func TestDecodeStrictFastFallsBackClean(t *testing.T) {
	// Invalid UTF-8 in a label: v1 takes it (as U+FFFD), v2 refuses it
	// after decoding the spec.
	raw := []byte("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"nodeName\":\"n1\"},\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"\xff\"}}}")
	if decodeV2(raw, &v1.Pod{}) == nil {
		t.Fatal("v2 took invalid UTF-8; the test needs input it refuses")
	}
	fast, strict := &v1.Pod{}, &v1.Pod{}
	if err := decodeStrictFast(raw, fast); err != nil {
		t.Fatal(err)
	}
	if err := decodeStrict(raw, strict); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Errorf("fallback decoded %+v, want %+v", fast, strict)
	}
}

// FuzzDecodeStrictFast: whatever encoding/json/v2 accepts as a Pod or a
// List, decodeStrict accepts too, without a strict error, as the same
// object. Run it longer
// with go test -fuzz FuzzDecodeStrictFast ./simulator/input/.
func FuzzDecodeStrictFast(f *testing.F) {
	for _, raw := range podDocuments(f) {
		f.Add(raw)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":null},"spec":{"priority":null,"containers":null}}`))
	f.Add([]byte(`{"metadata":{"labels":{"a":"\ud800"}},"spec":{"overhead":{"cpu":1e3}}}`))
	f.Add([]byte(`{"metadata":{"labels":{},"finalizers":[]},"spec":{"containers":[],"nodeSelector":{},"priority":0,"hostname":""},"status":{}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"\u0061pp","resources":{"requests":{"cpu":"1","cpu":"2"}}}]},"Spec":{}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[{"kind":"Pod"}, {"a" : [1, 2.5e3, "x"]}, null]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameAsStrict(t, raw, &v1.Pod{}, &v1.Pod{})
		sameAsStrict(t, raw, &listDocument{}, &listDocument{})
	})
}

// sameAsStrict fails t if encoding/json/v2 decodes raw into fast while
// decodeStrict refuses it, or decodes it into something else.
func sameAsStrict[T any](t *testing.T, raw []byte, fast, strict *T) {
	if decodeV2(raw, fast) != nil {
		return // decodeStrict decodes it and reports its errors
	}
	if err := decodeStrict(raw, strict); err != nil {
		t.Fatalf("v2 accepted as %T what decodeStrict refuses (%v):\n%s", fast, err, raw)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("decoded as %T differently:\n%s\nv2:     %+v\nstrict: %+v", fast, raw, fast, strict)
	}
}
