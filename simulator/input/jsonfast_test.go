package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// jsonStreams are JSON streams (whole files) with what encoding/json's
// decoder makes of them at the edges: adjacent values, whitespace,
// duplicates, invalid UTF-8, syntax errors midway.
func jsonStreams() []string {
	return []string{
		"", "  \n", "{}", "{}{}", "{} {}\n", "[1] 2", "1 2", "12", `"a""b"`, "null", "{", "{}x", "{} x", "]",
		`{"a":1,"a":2}`, "{\"kind\":\"\xff\"}", `{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod"}]} {"kind":"Node"}`,
		`{"a":[1,2,{"b":null}]}` + "\n\n" + `{"c":true}`, `{"a":1e400}`, `{"a":-0}`, `{"a":01}`, "{\"a\":\"\\ud800\"}",
		"\ufeff{}", "{}\x00", `{"a":"b"}   `, "\t[]\r\n[]",
	}
}

// v1Values is parseJSON's reading with encoding/json: the values before
// the first error, and that error.
func v1Values(data []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out [][]byte
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, raw)
	}
}

func checkSplitJSON(t *testing.T, data []byte) {
	t.Helper()
	got, ok := splitJSON(data)
	if !ok {
		return // encoding/json reads it, as before
	}
	want, err := v1Values(data)
	if err != nil {
		t.Fatalf("%q: split into %d values, but encoding/json fails: %v", data, len(got), err)
	}
	if len(got) != len(want) {
		t.Fatalf("%q: %d values, encoding/json %d", data, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%q: value %d is %q, encoding/json's %q", data, i, got[i], want[i])
		}
	}
}

func TestSplitJSONMatchesDecoder(t *testing.T) {
	for _, s := range jsonStreams() {
		checkSplitJSON(t, []byte(s))
	}
	// The common case is taken: a List, and documents one after another.
	list := []byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod"}]}`)
	if v, ok := splitJSON(list); !ok || len(v) != 1 {
		t.Errorf("a List: %d values, ok %v; want 1, taken", len(v), ok)
	}
	if v, ok := splitJSON([]byte("{\"kind\":\"Pod\"}\n{\"kind\":\"Node\"}\n")); !ok || len(v) != 2 {
		t.Errorf("two documents: %d values, ok %v; want 2, taken", len(v), ok)
	}
}

func checkReadTypeMeta(t *testing.T, raw []byte) {
	t.Helper()
	got, gotErr := readTypeMeta(raw)
	var want typeMeta
	wantErr := json.Unmarshal(raw, &want)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, encoding/json's %v", raw, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %+v, encoding/json's %+v", raw, got, want)
	}
}

func TestReadTypeMetaMatchesUnmarshal(t *testing.T) {
	docs := append(jsonStreams(),
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","kind":"x"}}`,
		`{"kind":"Pod","KIND":"Node"}`, `{"Kind":"Pod"}`, `{"APIVERSION":"v1"}`, `{"kind":"Pod","kind":"Node"}`,
		`{"kind":5}`, `{"kind":null}`, `{"kind":"Pod"`, `{"kind":"Pod"}}`, `[{"kind":"Pod"}]`, `"Pod"`,
		`{"kind":"P\u006fd","apiVers\u0069on":"v1"}`, `{"kınd":"Pod"}`, `{"\u212aind":"Pod"}`, `{"kind":"Pod","spec":{"a":[1,{"b":"c"}]},"x":1e400}`)
	for _, d := range docs {
		checkReadTypeMeta(t, []byte(d))
	}
	// The walk itself takes the usual documents.
	for _, d := range []string{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, `{"items":[],"kind":"List","apiVersion":"v1"}`} {
		if _, ok := new(typeMetaReader).walk([]byte(d)); !ok {
			t.Errorf("%s: left to encoding/json", d)
		}
	}
}

func FuzzReadTypeMeta(f *testing.F) {
	for _, d := range jsonStreams() {
		f.Add([]byte(d))
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","KIND":"x"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkReadTypeMeta(t, raw)
		checkSplitJSON(t, raw)
	})
}

// The walk's errors are never its own: anything it declines is
// encoding/json's to report.
func TestReadTypeMetaErrorsAreEncodingJSONs(t *testing.T) {
	_, err := readTypeMeta([]byte(`{"kind":5}`))
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		t.Errorf("error %v (%T), want encoding/json's UnmarshalTypeError", err, err)
	}
}
