package input

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// blockYAMLToJSON converts the block-style YAML that `kubectl get -o yaml`
// writes to exactly the bytes yaml.YAMLToJSONStrict gives for it (keys
// sorted, json.Marshal's escaping), without go-yaml's node tree and generic
// maps, which cost most of loading a large dump. It reads a deliberately
// small subset: block mappings and sequences, plain scalars whose type
// cannot be in doubt, one-line quoted scalars, `{}` and `[]`. Anything else
// (flow collections with content, block scalars, anchors, tags, comments
// after content, tabs, non-ASCII, a plain scalar go-yaml would read as a
// float, an octal or `yes`, a duplicate key, any malformation) answers
// ok=false and the caller uses go-yaml, which also owns every error
// message. TestBlockYAMLMatchesGoYAML and FuzzBlockYAML hold it to
// go-yaml's output byte for byte.
func blockYAMLToJSON(data []byte) (out []byte, ok bool) {
	var c blockConverter
	out, _, ok = c.convert(data)
	return out, ok
}

// convert is blockYAMLToJSON reusing c's buffers. It also returns the
// document's apiVersion and kind when both are plain strings (or absent),
// and nil when it could not tell: then they must be read from out.
func (c *blockConverter) convert(data []byte) (out []byte, tm *typeMeta, ok bool) {
	c.pos, c.keys, c.root, c.rootUnclear, c.depth = 0, c.keys[:0], typeMeta{}, false, 0
	if !c.split(data) || len(c.lines) == 0 || c.lines[0].indent != 0 {
		return nil, nil, false
	}
	// JSON quotes every key and string: a little longer than the YAML.
	c.out = make([]byte, 0, len(data)+len(data)/4+64)
	if !c.node(0, false) || c.pos != len(c.lines) {
		return nil, nil, false
	}
	out, c.out = c.out, nil
	if c.rootUnclear || out[0] != '{' { // a root sequence has no apiVersion to read
		return out, nil, true
	}
	root := c.root
	return out, &root, true
}

type blockLine struct {
	indent int
	text   []byte // after the indentation, trailing spaces removed
}

// blockConverter holds one conversion's state; its buffers are reused by
// the next conversion on the same goroutine.
type blockConverter struct {
	lines []blockLine
	pos   int // next line to read
	out   []byte
	// keys is a stack of the entries of the mappings being written, so
	// that a mapping whose keys are out of order can be rewritten sorted.
	keys []mapEntry
	// scratch holds a quoted scalar's value, sorted a mapping's entries.
	scratch, sorted []byte
	// root is the top-level apiVersion and kind; rootUnclear is set when
	// either is not a string without escapes.
	root        typeMeta
	rootUnclear bool
	// depth is how many nodes node() is inside.
	depth int
}

// maxBlockDepth bounds the nesting the fast reader takes, far below
// go-yaml's limit of 10,000 indentation levels (a node is at most two of
// them: a mapping in a sequence item) and far above any object's.
const maxBlockDepth = 1000

type mapEntry struct {
	key        []byte
	start, end int // the entry's `"key":value` in out
}

// split cuts data into content lines, refusing bytes the subset leaves to
// go-yaml: tabs, carriage returns, control and non-ASCII characters,
// directives and document markers.
func (c *blockConverter) split(data []byte) bool {
	c.lines = c.lines[:0]
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		for _, b := range line {
			if b < 0x20 || b >= 0x7f {
				return false
			}
		}
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		text := bytes.TrimRight(line[indent:], " ")
		switch {
		case len(text) == 0:
			continue
		case text[0] == '#':
			continue // a comment line
		case indent == 0 && (text[0] == '%' || bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("..."))):
			return false
		}
		c.lines = append(c.lines, blockLine{indent, text})
	}
	return true
}

// node writes the node whose first line is the next one, at exactly indent.
// compact says the node is a mapping value at its key's own indentation,
// which only a sequence may be.
func (c *blockConverter) node(indent int, compact bool) bool {
	if c.pos >= len(c.lines) || c.lines[c.pos].indent != indent || c.depth >= maxBlockDepth {
		return false
	}
	c.depth++
	defer func() { c.depth-- }()
	if isSeqItem(c.lines[c.pos].text) {
		return c.sequence(indent, compact)
	}
	if compact {
		return false
	}
	return c.mapping(indent, c.lines[c.pos].text)
}

func isSeqItem(text []byte) bool {
	return text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

// next reports the indentation of the next line, -1 at the end.
func (c *blockConverter) next() int {
	if c.pos >= len(c.lines) {
		return -1
	}
	return c.lines[c.pos].indent
}

// mapping writes a block mapping whose keys sit at indent; first is the
// text of its first entry (a line's, or what follows "- " in a sequence).
func (c *blockConverter) mapping(indent int, first []byte) bool {
	base := len(c.keys)
	defer func() { c.keys = c.keys[:base] }()
	c.out = append(c.out, '{')
	sorted := true
	text := first
	for {
		key, rest, ok := splitKey(text)
		if !ok {
			return false
		}
		if len(c.keys) > base {
			c.out = append(c.out, ',')
			switch bytes.Compare(key, c.keys[len(c.keys)-1].key) {
			case 0:
				return false // duplicate: go-yaml's strict mode says so
			case -1:
				sorted = false
			}
		}
		start := len(c.out)
		c.out = appendJSONString(c.out, key)
		c.out = append(c.out, ':')
		c.pos++
		valueStart := len(c.out)
		if !c.value(indent, rest) {
			return false
		}
		if indent == 0 { // the root mapping
			c.noteRoot(key, c.out[valueStart:])
		}
		c.keys = append(c.keys, mapEntry{key, start, len(c.out)})
		switch n := c.next(); {
		case n == indent:
			text = c.lines[c.pos].text
			if isSeqItem(text) {
				return false
			}
			continue
		case n > indent:
			return false // a continued scalar or bad indentation
		}
		break
	}
	if !sorted && !c.sortEntries(base) {
		return false
	}
	c.out = append(c.out, '}')
	return true
}

// noteRoot keeps the root's apiVersion and kind from their JSON values.
func (c *blockConverter) noteRoot(key, value []byte) {
	var field *string
	switch string(key) {
	case "apiVersion":
		field = &c.root.APIVersion
	case "kind":
		field = &c.root.Kind
	default:
		// encoding/json, which reads these where the fast reader is not
		// used, matches field names in any case: leave those to it.
		if bytes.EqualFold(key, []byte("apiVersion")) || bytes.EqualFold(key, []byte("kind")) {
			c.rootUnclear = true
		}
		return
	}
	if len(value) < 2 || value[0] != '"' || bytes.IndexByte(value, '\\') >= 0 {
		c.rootUnclear = true
		return
	}
	*field = string(value[1 : len(value)-1])
}

// value writes a mapping value: rest of the key's line, or the lines below.
func (c *blockConverter) value(indent int, rest []byte) bool {
	if len(rest) > 0 {
		return c.scalar(rest)
	}
	switch n := c.next(); {
	case n > indent:
		return c.node(n, false)
	case n == indent && isSeqItem(c.lines[c.pos].text):
		return c.node(n, true)
	}
	c.out = append(c.out, "null"...)
	return true
}

// sequence writes a block sequence whose dashes sit at indent. A compact
// one (a mapping value at its key's indentation) ends at the first line
// there that is not an item; any other must end with a shallower line.
func (c *blockConverter) sequence(indent int, compact bool) bool {
	c.out = append(c.out, '[')
	for first := true; ; first = false {
		if !first {
			c.out = append(c.out, ',')
		}
		text := c.lines[c.pos].text
		item := bytes.TrimLeft(text[1:], " ")
		switch {
		case len(item) == 0:
			c.pos++
			if n := c.next(); n > indent {
				if !c.node(n, false) {
					return false
				}
			} else {
				c.out = append(c.out, "null"...)
			}
		case isSeqItem(item):
			return false // "- - x"
		case isMappingEntry(item):
			// "- key: value": a mapping whose keys line up with this one.
			col := indent + len(text) - len(item)
			c.lines[c.pos].indent, c.lines[c.pos].text = col, item
			if !c.mapping(col, item) {
				return false
			}
		default:
			c.pos++
			if !c.scalar(item) {
				return false
			}
		}
		n := c.next()
		if n == indent && isSeqItem(c.lines[c.pos].text) {
			continue
		}
		if n > indent || (n == indent && !compact) {
			return false
		}
		c.out = append(c.out, ']')
		return true
	}
}

// isMappingEntry tells "key: value" and "key:" from a scalar.
func isMappingEntry(text []byte) bool {
	_, _, ok := splitKey(text)
	return ok
}

// splitKey splits "key: value" or "key:" into the key and the value text.
// Only keys go-yaml reads as the same string are accepted: plain ones (see
// plainKey) and one-line quoted ones.
func splitKey(text []byte) (key, rest []byte, ok bool) {
	var raw []byte
	switch text[0] {
	case '"', '\'':
		s, n, ok := quoted(nil, text)
		if !ok || n == len(text) || text[n] != ':' || n > maxKeyLen {
			return nil, nil, false
		}
		key, raw = s, text[n+1:]
	default:
		i := keyEnd(text)
		if i <= 0 || i > maxKeyLen || !plainKey(text[:i]) {
			return nil, nil, false
		}
		key, raw = text[:i], text[i+1:]
	}
	if len(raw) == 0 {
		return key, nil, true
	}
	if raw[0] != ' ' {
		return nil, nil, false
	}
	return key, bytes.TrimLeft(raw, " "), true
}

// scalar writes a value given on one line.
func (c *blockConverter) scalar(text []byte) bool {
	switch text[0] {
	case '"', '\'':
		s, n, ok := quoted(c.scratch[:0], text)
		c.scratch = s
		if !ok || n != len(text) {
			return false
		}
		c.out = appendJSONString(c.out, s)
		return true
	case '{', '[':
		if len(text) == 2 && text[1] == text[0]+2 { // "{}" or "[]"
			c.out = append(c.out, text...)
			return true
		}
		return false
	}
	if !plainSafe(text) || bytes.Contains(text, []byte(": ")) || text[len(text)-1] == ':' {
		return false
	}
	switch {
	// "-" or "--" and a letter: a command-line flag ("-c", "--config=x");
	// go-yaml's sign rule finds no number in it (its floats and integers
	// have a digit or a '.' after the sign).
	case isLetter(text[0]) || text[0] == '/',
		len(text) > 1 && text[0] == '-' && isLetter(text[1]),
		len(text) > 2 && text[0] == '-' && text[1] == '-' && isLetter(text[2]):
		switch string(text) {
		case "true", "false", "null":
			c.out = append(c.out, text...)
			return true
		}
		if isYAMLWord(text) {
			return false
		}
		c.out = appendJSONString(c.out, text)
		return true
	case text[0] >= '0' && text[0] <= '9', text[0] == '-' && len(text) > 1 && text[1] >= '0' && text[1] <= '9':
		switch digitsFirst(text) {
		case plainInt:
			c.out = append(c.out, text...)
			return true
		case plainString:
			c.out = appendJSONString(c.out, text)
			return true
		}
	}
	return false
}

type plainKind int

const (
	plainOther  plainKind = iota // a number go-yaml writes otherwise, or unsure
	plainInt                     // an integer written as JSON writes it
	plainString                  // a string
)

// yamlFloat is go-yaml v2's own test for a float.
var yamlFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// digitsFirst reads a plain scalar starting with a digit (or "-" and a
// digit) as go-yaml v2 resolves it: a timestamp stays a string when the
// target is untyped; anything strconv takes as an integer in any base,
// underscores removed, or that looks like a float or a binary number is
// a number.
func digitsFirst(text []byte) plainKind {
	if bytes.HasPrefix(text, []byte("0b")) || bytes.HasPrefix(text, []byte("-0b")) {
		return plainOther
	}
	// A "-" past the sign, not in an exponent, is in no number (UIDs,
	// dates): skip the parsers, whose errors allocate.
	for i := 1; i < len(text); i++ {
		if text[i] == '-' && text[i-1]|0x20 != 'e' {
			return plainString
		}
	}
	plain := strings.ReplaceAll(string(text), "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		if isDecimalInt(text) {
			return plainInt
		}
		return plainOther
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return plainOther
	}
	if yamlFloat.MatchString(plain) || strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b") {
		return plainOther
	}
	return plainString
}

// quoted reads a quoted scalar at the start of text: its value and the
// length of the quoted text. Escapes other than the common ones, and
// strings not closed on the line, are left to go-yaml.
func quoted(buf, text []byte) ([]byte, int, bool) {
	q := text[0]
	for i := 1; i < len(text); i++ {
		ch := text[i]
		switch {
		case ch == q && q == '\'' && i+1 < len(text) && text[i+1] == '\'':
			buf = append(buf, '\'')
			i++
		case ch == q:
			return buf, i + 1, true
		case ch == '\\' && q == '"':
			if i+1 >= len(text) {
				return buf, 0, false
			}
			i++
			switch text[i] {
			case '\\', '"':
				buf = append(buf, text[i])
			case 'n':
				buf = append(buf, '\n')
			case 't':
				buf = append(buf, '\t')
			default:
				return buf, 0, false
			}
		default:
			buf = append(buf, ch)
		}
	}
	return buf, 0, false
}

func isLetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// maxKeyLen bounds the keys the fast reader takes: YAML limits an
// implicit key to 1024 characters and go-yaml refuses a longer one
// (found by FuzzBlockYAML).
const maxKeyLen = 1000

// keyEnd is where a plain key ends: at the first ':' followed by a space
// or the end of the line. A ':' followed by anything else belongs to the
// key, as in managedFields' "f:spec".
func keyEnd(text []byte) int {
	for i, b := range text {
		if b == ':' && (i+1 == len(text) || text[i+1] == ' ') {
			return i
		}
	}
	return -1
}

// plainKey: a plain key go-yaml reads as this very string. It starts with
// a letter and is not a boolean or null word, or it is "." (managedFields
// has both, and keys like `k:{"type":"Ready"}`); it holds no space.
func plainKey(k []byte) bool {
	if len(k) == 1 && k[0] == '.' {
		return true
	}
	if !isLetter(k[0]) || isYAMLWord(k) {
		return false
	}
	for _, b := range k {
		if !plainByte(b) {
			return false
		}
	}
	return true
}

// plainSafe: the bytes a plain scalar of the subset may hold: printable
// ASCII and spaces, but not " #", a comment. The first byte, which decides
// whether it is an indicator, is the caller's to check, and so are ": "
// and a final ':'. In block context nothing else ends or changes a plain
// scalar: flow characters, quotes and indicators past the first byte are
// text.
func plainSafe(text []byte) bool {
	for i, b := range text {
		switch {
		case b == ' ':
			if i+1 < len(text) && text[i+1] == '#' {
				return false
			}
		case !plainByte(b):
			return false
		}
	}
	return true
}

// plainByte: printable ASCII other than space.
func plainByte(b byte) bool { return b > ' ' && b < 0x7f }

// isYAMLWord: in any letter case, a plain scalar YAML 1.1 reads as a
// boolean or null.
func isYAMLWord(text []byte) bool {
	if len(text) > 5 {
		return false
	}
	// Compared in place: this runs for every plain key and value.
	for _, w := range [...]string{"y", "yes", "n", "no", "true", "false", "on", "off", "null"} {
		if len(w) == len(text) && bytes.EqualFold([]byte(w), text) {
			return true
		}
	}
	return false
}

// isDecimalInt: an integer go-yaml reads as the same int64 and json.Marshal
// writes with the same digits (no sign but "-", no leading zero, no "-0",
// at most 18 digits).
func isDecimalInt(text []byte) bool {
	digits := text
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && (len(digits) > 1 || len(text) > 1)) {
		return false
	}
	for _, b := range digits {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// appendJSONString writes s as json.Marshal does: quotes, backslash
// escapes for '"' and '\\', \n and \t, and \u escapes for the HTML
// characters. s holds printable ASCII plus \n and \t only.
func appendJSONString(out, s []byte) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch b := s[i]; b {
		case '"', '\\':
			out = append(out, '\\', b)
		case '\n':
			out = append(out, '\\', 'n')
		case '\t':
			out = append(out, '\\', 't')
		case '<', '>', '&':
			out = append(out, '\\', 'u', '0', '0', "0123456789abcdef"[b>>4], "0123456789abcdef"[b&0xf])
		default:
			out = append(out, b)
		}
	}
	return append(out, '"')
}

// sortEntries rewrites the entries of the mapping from c.keys[base:] in
// key order, as json.Marshal orders a map; a duplicate key refuses.
func (c *blockConverter) sortEntries(base int) bool {
	entries := c.keys[base:]
	start := entries[0].start
	slices.SortFunc(entries, func(a, b mapEntry) int { return bytes.Compare(a.key, b.key) })
	c.sorted = c.sorted[:0]
	for i, e := range entries {
		if i > 0 {
			if bytes.Equal(e.key, entries[i-1].key) {
				return false
			}
			c.sorted = append(c.sorted, ',')
		}
		c.sorted = append(c.sorted, c.out[e.start:e.end]...)
	}
	c.out = append(c.out[:start], c.sorted...)
	return true
}
