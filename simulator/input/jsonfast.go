package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
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
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
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
// value that is not a string, text after the object) goes to
// encoding/json itself.
func readTypeMeta(raw []byte) (typeMeta, error) {
	if tm, ok := walkTypeMeta(raw); ok {
		return tm, nil
	}
	var tm typeMeta
	err := json.Unmarshal(raw, &tm)
	return tm, err
}

func walkTypeMeta(raw []byte) (typeMeta, bool) {
	var tm typeMeta
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return tm, false
	}
	seenVersion, seenKind := false, false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return tm, false
		}
		var into *string
		switch n := name.String(); {
		case n == "apiVersion" && !seenVersion:
			into, seenVersion = &tm.APIVersion, true
		case n == "kind" && !seenKind:
			into, seenKind = &tm.Kind, true
		case strings.EqualFold(n, "apiVersion") || strings.EqualFold(n, "kind"):
			return tm, false
		}
		if into == nil {
			if dec.SkipValue() != nil {
				return tm, false
			}
			continue
		}
		val, err := dec.ReadToken()
		if err != nil || val.Kind() != '"' {
			return tm, false
		}
		// Invalid UTF-8 is replaced by both, but whether alike is not
		// worth knowing.
		if *into = val.String(); strings.ContainsRune(*into, utf8.RuneError) {
			return tm, false
		}
	}
	if _, err := dec.ReadToken(); err != nil { // the closing '}'
		return tm, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return tm, false
	}
	return tm, true
}
