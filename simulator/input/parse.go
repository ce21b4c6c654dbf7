package input

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// MaxFileSize caps one input file. A cluster dump of a few thousand nodes
// and pods is well below it; the cap keeps a wrong path (a disk image, a
// log) from being read into memory.
const MaxFileSize = 64 << 20

// handler decodes, defaults, validates and stores one object of its kind.
type handler func(p *parser, d doc, raw []byte)

// kindHandlers returns the handlers keyed by "apiVersion/kind", built per
// parse so that no registry outlives it.
func kindHandlers() map[string]handler {
	h := map[string]handler{}
	addCoreKinds(h)
	addWorkloadKinds(h)
	addNodeGroupKind(h)
	addClusterAPIKinds(h)
	addBatchKinds(h)
	addGangKinds(h)
	return h
}

// DefaultMaxPodsPerWorkload bounds the expansion of one workload, so a
// typo like "replicas: 1000000000" fails with a message instead of
// exhausting memory. It is Kubernetes' documented limit of pods in one
// cluster.
const DefaultMaxPodsPerWorkload = 150000

// DefaultMaxPods bounds the pods all workloads of an input expand to
// together. A planned pod costs about 10 KB through the plan, so the
// default keeps a run within about 2 GiB; --max-pods raises it.
const DefaultMaxPods = 200000

// Options tune Parse; the zero value is the default.
type Options struct {
	// MaxPods is how many pods all workloads together may expand to;
	// 0 means DefaultMaxPods.
	MaxPods int64
	// MaxPodsPerWorkload is how many pods one Deployment, ReplicaSet,
	// StatefulSet or Job may expand to; 0 means DefaultMaxPodsPerWorkload.
	MaxPodsPerWorkload int64
}

// parser collects the objects and the errors of one file.
type parser struct {
	out                *Objects
	errs               []error
	handlers           map[string]handler
	maxPodsPerWorkload int64
	// podBudget is how many more pods workloads may expand to.
	podBudget int64
}

// doc is the position of one object: "a.yaml: document 2" or, for an
// item of a List, "a.yaml: document 2: items[3]".
type doc struct{ loc string }

// fail records err (and each error joined into it) prefixed with the
// position and, when known, the object ("Pod default/web").
func (p *parser) fail(d doc, what string, err error) {
	prefix := d.loc + ": "
	if what != "" {
		prefix += what + ": "
	}
	for _, e := range flatten(err) {
		p.errs = append(p.errs, fmt.Errorf("%s%w", prefix, e))
	}
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Parse parses one file's bytes; source names the file in errors. A
// source ending in ".json" is read as a stream of JSON values, anything
// else as multi-document YAML (which includes a single JSON object).
func Parse(data []byte, source string) (*Objects, error) {
	return Options{}.Parse(data, source)
}

// Parse is Parse with these options.
func (o Options) Parse(data []byte, source string) (*Objects, error) {
	out, err := o.parse(data, source)
	if err != nil {
		return nil, err
	}
	out.PlaceBindingPods()
	out.TimeUntimedPods()
	return out, nil
}

// parse reads one file of several: pods being bound are placed once all
// files are merged, as their claims and nodes may be in other files.
func (o Options) parse(data []byte, source string) (*Objects, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: file is %d bytes, more than the limit of %d bytes", source, len(data), MaxFileSize)
	}
	p := &parser{out: &Objects{}, handlers: kindHandlers(), maxPodsPerWorkload: o.MaxPodsPerWorkload, podBudget: o.MaxPods}
	if p.podBudget == 0 {
		p.podBudget = DefaultMaxPods
	}
	if p.maxPodsPerWorkload == 0 {
		p.maxPodsPerWorkload = DefaultMaxPodsPerWorkload
	}
	if strings.HasSuffix(strings.ToLower(source), ".json") {
		p.parseJSON(data, source)
	} else {
		p.parseYAML(data, source)
	}
	if len(p.errs) == 0 && p.out.count() == 0 && len(p.out.Skipped) > 0 {
		p.errs = append(p.errs, fmt.Errorf("%s: nothing draxr reads (%s)", source, p.out.SkippedSummary()))
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	p.out.reconcileWorkloads()
	return p.out, nil
}

func (p *parser) parseJSON(data []byte, source string) {
	if values, ok := splitJSON(data); ok {
		for i, raw := range values {
			p.document(doc{fmt.Sprintf("%s: document %d", source, i+1)}, raw, nil)
		}
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return
		}
		d := doc{fmt.Sprintf("%s: document %d", source, n)}
		if err != nil {
			p.fail(d, "", fmt.Errorf("malformed JSON: %w", err))
			return // the decoder cannot resynchronise after a syntax error
		}
		p.document(d, raw, nil)
	}
}

func (p *parser) parseYAML(data []byte, source string) {
	parts := splitYAML(data)
	for i := range parts {
		parts[i].json, parts[i].tm, _ = convertBlockList(parts[i].data)
	}
	loc := func(i int) doc { return doc{fmt.Sprintf("%s: document %d", source, i+1)} }
	convertYAML(parts, func(i int, raw []byte, known *typeMeta) any {
		// A Pod document (most of a dump) is decoded and validated here,
		// on every core; document() would reach the same handler.
		tm, ok := typeMeta{}, true
		if known != nil {
			tm = *known
		} else {
			tm, ok = peekTypeMeta(raw)
		}
		if ok && tm.APIVersion == "v1" && tm.Kind == "Pod" {
			return preparePod(loc(i), raw)
		}
		return known // nil, or what document() need not read again
	}, func(i int, raw []byte, err error, prepared any) {
		d := loc(i)
		if err != nil {
			p.fail(d, "", fmt.Errorf("malformed YAML: %s", fileLines(err.Error(), parts[i].line)))
			return
		}
		if err := trailingAfterJSON(parts[i].data); err != nil {
			p.fail(d, "", err)
			return
		}
		if pp, ok := prepared.(*preparedPod); ok {
			p.commitPod(d, pp)
			return
		}
		known, _ := prepared.(*typeMeta)
		p.document(d, raw, known)
	})
}

// peekTypeMeta is what document() reads first: the apiVersion and kind of
// a non-empty document.
func peekTypeMeta(raw []byte) (typeMeta, bool) {
	var tm typeMeta
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" || string(trimmed) == "{}" {
		return tm, false
	}
	tm, err := readTypeMeta(trimmed)
	return tm, err == nil
}

// trailingAfterJSON rejects a document that is a JSON value followed by
// more text: the YAML reader stops after the value and would quietly drop
// the rest (a concatenation mistake, or a truncated second object).
func trailingAfterJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil // YAML flow style, not JSON: the YAML reader judged it
	}
	rest := bytes.TrimSpace(trimmed[dec.InputOffset():])
	for _, line := range bytes.Split(rest, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return fmt.Errorf("content after the JSON document: %q", quoteShort(string(l)))
		}
	}
	return nil
}

// quoteShort keeps error messages short whatever the input: a value is
// quoted by at most its first 64 bytes.
func quoteShort(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + fmt.Sprintf("... (%d bytes)", len(s))
}

var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// fileLines turns go-yaml's line numbers, which count from the start of
// the document, into line numbers of the file.
func fileLines(msg string, docStart int) string {
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(yamlLine.FindStringSubmatch(m)[1])
		return fmt.Sprintf("line %d", n+docStart-1)
	})
}

type yamlPart struct {
	data []byte
	line int // 1-based line of the document's first line in the file
	// json and tm are the document converted ahead (a large List, see
	// convertBlockList), or nil.
	json []byte
	tm   *typeMeta
}

// splitYAML splits at "---" lines. Text before the first separator is a
// document only if it holds more than blank lines and comments, so a file
// that starts with "---" numbers its first real document 1, as a reader
// would count.
func splitYAML(data []byte) []yamlPart {
	var parts []yamlPart
	start, startLine, line := 0, 1, 1
	afterSeparator := false
	for pos := 0; pos < len(data); line++ {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		text := bytes.TrimRight(data[pos:next], "\r\n")
		if len(text) >= 3 && string(text[:3]) == "---" && (len(text) == 3 || text[3] == ' ' || text[3] == '\t') {
			if afterSeparator || hasContent(data[start:pos]) {
				parts = append(parts, yamlPart{data: data[start:pos], line: startLine})
			}
			// A "--- value" line carries content of the new document.
			start, startLine, afterSeparator = pos+3, line, true
		}
		pos = next
	}
	if afterSeparator || hasContent(data[start:]) {
		parts = append(parts, yamlPart{data: data[start:], line: startLine})
	}
	return parts
}

func hasContent(b []byte) bool {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return true
		}
	}
	return false
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// document dispatches one document; List kinds expand to their items.
// known, when not nil, is its apiVersion and kind as the fast YAML reader
// read them, which spares reading a large List twice.
func (p *parser) document(d doc, raw []byte, known *typeMeta) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" || string(trimmed) == "{}" {
		return // an empty document, e.g. a trailing "---"
	}
	if known == nil {
		tm, err := readTypeMeta(trimmed)
		if err != nil {
			p.fail(d, "", fmt.Errorf("not an object with apiVersion and kind: %w", err))
			return
		}
		known = &tm
	}
	tm := *known
	if !strings.HasSuffix(tm.Kind, "List") {
		p.object(d, raw, tm)
		return
	}
	var list listDocument
	if err := decodeStrictFast(trimmed, &list); err != nil {
		p.fail(d, tm.Kind, err)
		return
	}
	// Items of a typed list (NodeList, as the API returns it) carry no
	// apiVersion and kind; those of a v1 List (kubectl -o yaml) do.
	var itemType typeMeta
	if tm.Kind != "List" {
		itemType = typeMeta{APIVersion: tm.APIVersion, Kind: strings.TrimSuffix(tm.Kind, "List")}
	}
	// `kubectl get -o yaml` writes one List: its pods are decoded and
	// validated on every core, as separate documents are, and stored in
	// order.
	items := make([]listItem, len(list.Items))
	readers := sync.Pool{New: func() any { return new(typeMetaReader) }}
	workqueue.ParallelizeUntil(context.Background(), runtime.GOMAXPROCS(0), len(items), func(i int) {
		it := &items[i]
		it.doc = doc{fmt.Sprintf("%s: items[%d]", d.loc, i)}
		r := readers.Get().(*typeMetaReader)
		it.typeMeta, it.err = r.read(list.Items[i])
		readers.Put(r)
		if it.err != nil {
			return
		}
		if it.Kind == "" {
			it.Kind = itemType.Kind
		}
		if it.APIVersion == "" {
			it.APIVersion = itemType.APIVersion
		}
		if it.APIVersion == "v1" && it.Kind == "Pod" {
			it.pod = preparePod(it.doc, list.Items[i])
		}
	}, workqueue.WithChunkSize(64))
	for i, it := range items {
		switch {
		case it.err != nil:
			p.fail(it.doc, "", fmt.Errorf("not an object with apiVersion and kind: %w", it.err))
		case strings.HasSuffix(it.Kind, "List"):
			p.fail(it.doc, it.Kind, errors.New("a list inside a list is not supported"))
		case it.pod != nil:
			p.commitPod(it.doc, it.pod)
		default:
			p.object(it.doc, list.Items[i], it.typeMeta)
		}
	}
}

// listDocument is a List as document() reads it: its items stay raw.
type listDocument struct {
	typeMeta `json:",inline"`
	Metadata json.RawMessage   `json:"metadata,omitempty"`
	Items    []json.RawMessage `json:"items"`
}

// listItem is one item of a List, as far as it is read on every core.
type listItem struct {
	doc
	typeMeta
	err error
	pod *preparedPod
}

func (p *parser) object(d doc, raw []byte, tm typeMeta) {
	if tm.Kind == "" || tm.APIVersion == "" {
		p.fail(d, "", fmt.Errorf("apiVersion and kind are required (got apiVersion %q, kind %q)", tm.APIVersion, tm.Kind))
		return
	}
	h, ok := p.handlers[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		switch p.unread(tm) {
		case kindSkipped:
			if p.out.Skipped == nil {
				p.out.Skipped = map[string]int{}
			}
			p.out.Skipped[tm.APIVersion+" "+tm.Kind]++
			return
		case kindInfrastructure:
			p.clusterAPIObject(d, raw, tm.Kind)
			return
		}
		p.fail(d, "", fmt.Errorf("unsupported kind %q in apiVersion %q; supported: %s",
			tm.Kind, tm.APIVersion, strings.Join(p.supportedKinds(), ", ")))
		return
	}
	h(p, d, raw)
}

type unreadKind int

const (
	kindRejected       unreadKind = iota
	kindSkipped                   // a kind the planner has no use for
	kindInfrastructure            // a Cluster API infrastructure object
)

// plannerGroup says whether the planner reads kinds of an API group: an
// unknown kind there is a typo ("Pdo" in v1), not a kind to skip.
func plannerGroup(group string) bool {
	switch group {
	case "", "apps", "batch", "resource.k8s.io", "draxr.dev":
		return true
	}
	return false
}

// unread says what becomes of an object no handler reads: a kind the
// planner reads under another apiVersion is rejected (skipping a
// ResourceSlice of an older version would lose devices), so is an unknown
// kind in a group the planner reads; Kubernetes' other kinds and custom
// resources are skipped, infrastructure objects kept for the Cluster API
// provider.
func (p *parser) unread(tm typeMeta) unreadKind {
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return kindRejected
	}
	for key := range p.handlers {
		if strings.HasSuffix(key, "/"+tm.Kind) {
			return kindRejected
		}
	}
	switch {
	case strings.HasPrefix(gv.Group, "infrastructure."):
		// Providers name their own groups: infrastructure.cluster.x-k8s.io
		// by convention, not always.
		return kindInfrastructure
	case legacyscheme.Scheme.Recognizes(gv.WithKind(tm.Kind)):
		return kindSkipped
	case plannerGroup(gv.Group):
		return kindRejected
	}
	return kindSkipped
}

func (p *parser) supportedKinds() []string {
	var out []string
	for k := range p.handlers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
