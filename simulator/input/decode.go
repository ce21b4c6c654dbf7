package input

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	kjson "sigs.k8s.io/json"
)

// decodeV2 is decodeStrictFast's first try, under decodeStrict's rules in
// encoding/json/v2's terms: names match case-sensitively, unknown and
// duplicate names are errors. v2 also refuses invalid UTF-8, which v1
// replaces; such input falls back to v1.
func decodeV2[T any](raw []byte, into *T) error {
	return jsonv2.Unmarshal(raw, into,
		jsonv2.MatchCaseInsensitiveNames(false),
		jsonv2.RejectUnknownMembers(true),
		jsontext.AllowDuplicateNames(false),
		jsontext.AllowInvalidUTF8(false))
}

// decodeStrictFast is decodeStrict at twice the speed and a third of the
// allocations, for the types the differential tests hold it to (Pod, most
// of a dump, and the List around them): encoding/json/v2 decodes, and
// whatever it refuses is decoded again by decodeStrict, whose errors (and
// field paths) are the ones reported. FuzzDecodeStrictFast checks that
// what v2 accepts, decodeStrict accepts as the same object.
func decodeStrictFast[T any](raw []byte, into *T) error {
	if decodeV2(raw, into) == nil {
		return nil
	}
	var zero T
	*into = zero // v2 leaves what it decoded before the error
	return decodeStrict(raw, into)
}

// decodeStrict decodes like the API server in strict mode: case-sensitive
// field names, unknown and duplicate fields are errors, type errors name
// the field path (e.g. "spec.replicas").
func decodeStrict(raw []byte, into any) error {
	strict, err := kjson.UnmarshalStrict(raw, into)
	if err != nil {
		// A type with its own UnmarshalJSON (Quantity, Time, IntOrString)
		// reports a bad value without saying where it is; find it.
		if path, perr := findBadValue(raw, reflect.TypeOf(into), ""); path != "" {
			return fmt.Errorf("%s: %w", path, perr)
		}
		return err
	}
	return errors.Join(strict...)
}

// findBadValue walks raw along the Go type t and returns the path of the
// first value that t's own UnmarshalJSON rejects, and that error.
func findBadValue(raw json.RawMessage, t reflect.Type, path string) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return path, fmt.Errorf("invalid value %s: %w", raw, err)
		}
		return "", nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil {
			return "", nil
		}
		return findInStruct(fields, t, path)
	case reflect.Slice:
		var items []json.RawMessage
		if t.Elem().Kind() == reflect.Uint8 || json.Unmarshal(raw, &items) != nil {
			return "", nil
		}
		for i, item := range items {
			if p, err := findBadValue(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, err
			}
		}
	case reflect.Map:
		var entries map[string]json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			return "", nil
		}
		for _, k := range slices.Sorted(maps.Keys(entries)) {
			if p, err := findBadValue(entries[k], t.Elem(), fmt.Sprintf("%s[%s]", path, k)); p != "" {
				return p, err
			}
		}
	}
	return "", nil
}

func findInStruct(fields map[string]json.RawMessage, t reflect.Type, path string) (string, error) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" { // inline: its fields are at this level
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if p, err := findInStruct(fields, ft, path); p != "" {
					return p, err
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		raw, ok := fields[name]
		if !ok {
			continue
		}
		child := name
		if path != "" {
			child = path + "." + name
		}
		if p, err := findBadValue(raw, f.Type, child); p != "" {
			return p, err
		}
	}
	return "", nil
}

// describe names an object whose decoding failed, as far as a lenient
// look at its metadata allows ("Deployment web" or just "Deployment").
func describe(kind string, raw []byte) string {
	var peek struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &peek) // best effort: the real error follows
	if peek.Metadata.Name == "" {
		return kind
	}
	return objectKey{kind, peek.Metadata.Namespace, peek.Metadata.Name}.String()
}
