package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// splitJSON returns the top-level values of a JSON stream, in place (no
// copy), read by encoding/json/v2's jsontext at about a seventh of
// encoding/json's decoder's time on a 50 MB List. ok is false when
// jsontext refuses anything: the stream is then read by encoding/json,
// whose errors are the ones reported. Duplicate names and invalid UTF-8
// are let through, as encoding/json's decoder lets them through.
func splitJSON(data []byte) (values [][]byte, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	start := int64(0)
	for {
		if _, err := dec.ReadValue(); err != nil {
			return values, err == io.EOF
		}
		end := dec.InputOffset()
		values = append(values, bytes.TrimSpace(data[start:end]))
		start = end
	}
}

// readTypeMeta is json.Unmarshal(raw, &tm): the same result and error, at
// a fraction of the time on a large document. jsontext walks the top-level
// names and skips the values; anything where encoding/json might read the
// names otherwise (a name differing only in case, a name given twice, a
// value that is not a plain string, text after the object) goes to
// encoding/json itself.
func readTypeMeta(raw []byte) (typeMeta, error) {
	return new(typeMetaReader).read(raw)
}

// typeMetaReader is readTypeMeta with a decoder kept between documents:
// a fresh one allocates its state machine again (18 allocations a pod).
// One per goroutine.
type typeMetaReader struct {
	dec jsontext.Decoder
}

func (r *typeMetaReader) read(raw []byte) (typeMeta, error) {
	if tm, ok := r.walk(raw); ok {
		return tm, nil
	}
	var tm typeMeta
	err := json.Unmarshal(raw, &tm)
	return tm, err
}

func (r *typeMetaReader) walk(raw []byte) (typeMeta, bool) {
	var tm typeMeta
	dec := &r.dec
	// A bytes.Buffer is read in place, not copied into the decoder.
	dec.Reset(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return tm, false
	}
	seenVersion, seenKind := false, false
	for dec.PeekKind() != '}' {
		// Names and values are compared as they stand, without the
		// strings Token.String would allocate for every name.
		name, ok := readUnescaped(dec)
		if !ok {
			return tm, false
		}
		var into *string
		switch {
		case string(name) == "apiVersion" && !seenVersion:
			into, seenVersion = &tm.APIVersion, true
		case string(name) == "kind" && !seenKind:
			into, seenKind = &tm.Kind, true
		case bytes.EqualFold(name, []byte("apiVersion")) || bytes.EqualFold(name, []byte("kind")):
			return tm, false
		}
		if into == nil {
			if dec.SkipValue() != nil {
				return tm, false
			}
			continue
		}
		val, ok := readUnescaped(dec)
		if !ok {
			return tm, false
		}
		*into = string(val)
	}
	if _, err := dec.ReadToken(); err != nil { // the closing '}'
		return tm, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return tm, false
	}
	return tm, true
}

// readUnescaped reads the next name or value: a string without escapes in
// valid UTF-8, given without its quotes (valid until the next read). Any
// other value is not: an escape or invalid UTF-8 is left to encoding/json,
// which decodes them its own way.
func readUnescaped(dec *jsontext.Decoder) ([]byte, bool) {
	v, err := dec.ReadValue()
	if err != nil || v.Kind() != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		return nil, false
	}
	return v[1 : len(v)-1], true
}
