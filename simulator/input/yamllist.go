package input

import (
	"bytes"
	"regexp"
	"runtime"
	"sync"

	"sigs.k8s.io/yaml"
)

// listSplitMinBytes is the size from which a List document's items are
// converted on every core; below it one conversion is quicker.
const listSplitMinBytes = 256 << 10

// convertBlockList converts a large List document as `kubectl get -o yaml`
// writes it, one document holding every object, on every core: its
// top-level keys at column 0, "items:" among them followed by entries
// "- ..." at column 0 whose other lines are indented by two or more. Each
// entry, moved two columns left, is a document of its own, and so is the
// rest; the relative indentation YAML reads is unchanged for a mapping,
// which every item must be (an object). The fast reader converts each
// part, go-yaml the items it declines, as long as no part can reach
// another: the fast reader takes no anchor, alias or tag, and an item
// left to go-yaml may hold none either (no '&', '*' or '!' byte, where
// shell commands in pods would be no harm to the fast reader); the head
// is the fast reader's; every item converts alone (a quote or bracket
// left open would not); an item left to go-yaml is far from its depth
// limit (see shallow). Anything else, and any error, answers ok=false, and
// the caller converts the document whole, so errors are those of the
// whole document. The JSON has "items" first; keys are not sorted across
// it.
func convertBlockList(data []byte) (out []byte, tm *typeMeta, ok bool) {
	return convertBlockListFrom(data, listSplitMinBytes)
}

func convertBlockListFrom(data []byte, minBytes int) (out []byte, tm *typeMeta, ok bool) {
	if len(data) < minBytes || !bytes.HasPrefix(data, []byte("items:\n")) && !bytes.Contains(data, []byte("\nitems:\n")) {
		return nil, nil, false
	}
	head, items, ok := splitBlockList(data)
	if !ok {
		return nil, nil, false
	}
	// The fast reader takes only values complete on their lines (or
	// indented below them), so no head value can run on past the items.
	var conv blockConverter
	headJSON, tm, ok := conv.convert(head)
	if !ok || len(headJSON) < 2 || headJSON[0] != '{' {
		return nil, nil, false
	}
	converted := make([][]byte, len(items)) // nil where an item failed
	workers := min(runtime.GOMAXPROCS(0), len(items))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var conv blockConverter // its buffers serve every item of the worker
			for i := w; i < len(items); i += workers {
				converted[i] = convertItem(&conv, items[i])
			}
		})
	}
	wg.Wait()
	size := len(headJSON) + len(`{"items":[],`)
	for _, item := range converted {
		if item == nil {
			return nil, nil, false
		}
		size += len(item) + 1
	}
	out = make([]byte, 0, size)
	out = append(out, `{"items":[`...)
	for i, item := range converted {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, item...)
	}
	out = append(out, ']')
	if len(headJSON) > 2 { // more than "{}"
		out = append(out, ',')
	}
	out = append(out, headJSON[1:]...)
	return out, tm, true
}

// convertItem converts one item ("- key: ..." and its lines) on its own,
// or answers nil where that could read otherwise than inside the List.
func convertItem(conv *blockConverter, raw []byte) []byte {
	item, ok := dedentItem(raw)
	if !ok {
		return nil
	}
	out, _, ok := conv.convert(item)
	if !ok {
		if !shallow(item) || bytes.ContainsAny(item, "&*!") {
			return nil
		}
		var err error
		if out, err = yaml.YAMLToJSONStrict(item); err != nil {
			return nil
		}
	}
	// Only a mapping reads the same at the root as in the sequence: a
	// block scalar there has other indentation rules. Objects are what a
	// List holds.
	if len(out) == 0 || out[0] != '{' {
		return nil
	}
	return out
}

// plainKeyLine is a line that starts a block mapping with a plain key.
var plainKeyLine = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./-]*:( |$)`)

// splitBlockList cuts a List document into its items, as they stand in
// data (dedentItem moves each two columns left, on every core), and the
// rest (head). ok=false when the document is not that plain shape: a
// line at column 0 that is not a plain key (a comment, a marker, a
// complex key), an indented line before the first key, a tab or a
// carriage return in the head, "items:" twice or with a value on its
// line, no item, or an item line at column 0 other than "- ...".
func splitBlockList(data []byte) (head []byte, items [][]byte, ok bool) {
	head = make([]byte, 0, 4096)
	itemStart := -1 // offset in data of the item being read
	inItems, seenItems, rootKeySeen := false, false, false
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n') + 1
		if end == 0 {
			end = len(data) - pos
		}
		line := data[pos : pos+end]
		text := bytes.TrimSuffix(line, []byte("\n"))
		if inItems {
			switch {
			case len(text) == 0 || text[0] == ' ':
				// A line of the item (dedentItem checks its indentation).
				if itemStart < 0 {
					return nil, nil, false
				}
				pos += end
				continue
			case text[0] == '-':
				if itemStart >= 0 {
					items = append(items, data[itemStart:pos])
				}
				itemStart = pos
				pos += end
				continue
			}
			if itemStart >= 0 {
				items = append(items, data[itemStart:pos])
				itemStart = -1
			}
			inItems = false // a top-level key: the head goes on
		}
		pos += end
		if bytes.ContainsAny(text, "\r\t") {
			return nil, nil, false
		}
		switch {
		case len(text) == 0:
		case text[0] == ' ':
			if !rootKeySeen {
				return nil, nil, false // the root starts further right
			}
			// A line of a head key's value.
		case string(text) == "items:":
			if seenItems {
				return nil, nil, false
			}
			inItems, seenItems, rootKeySeen = true, true, true
			continue
		case !plainKeyLine.Match(text):
			return nil, nil, false // a comment, a marker, a complex key...
		default:
			rootKeySeen = true
		}
		head = append(head, line...)
	}
	if itemStart >= 0 {
		items = append(items, data[itemStart:])
	}
	if len(items) == 0 {
		return nil, nil, false
	}
	return head, items, true
}

// dedentItem moves an item ("- key: ..." and the lines below it) two
// columns left. ok=false for a tab or a carriage return, a first line that
// is not a plain key right after "- " (every object's "apiVersion:"; at
// the root, a flow or quoted node, or one starting further right, does
// not read as it does in the sequence: go-yaml drops what follows "{}"
// there), or a line indented by one column.
func dedentItem(item []byte) ([]byte, bool) {
	if bytes.ContainsAny(item, "\r\t") {
		return nil, false
	}
	out := make([]byte, 0, len(item))
	for first := true; len(item) > 0; first = false {
		end := bytes.IndexByte(item, '\n') + 1
		if end == 0 {
			end = len(item)
		}
		line := item[:end]
		item = item[end:]
		switch {
		case first:
			if !bytes.HasPrefix(line, []byte("- ")) || !plainKeyLine.Match(bytes.TrimSuffix(line[2:], []byte("\n"))) {
				return nil, false
			}
			out = append(out, line[2:]...)
		case line[0] == '\n':
			out = append(out, '\n')
		case bytes.HasPrefix(line, []byte("  ")):
			out = append(out, line[2:]...)
		default:
			return nil, false // one column
		}
	}
	return out, true
}

// shallow says that no line of an item is long enough to reach go-yaml's
// limit of 10,000 indentation levels, which the item has one fewer of
// alone than inside the List: a level starts at a column past its parent's.
func shallow(item []byte) bool {
	for line := range bytes.SplitSeq(item, []byte("\n")) {
		if len(line) >= 9000 {
			return false
		}
	}
	return true
}
