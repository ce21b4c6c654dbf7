package input

import (
	"runtime"
	"sync"

	"sigs.k8s.io/yaml"
)

// yamlChunk is how many documents one worker converts at a time: large
// enough that handing out work costs nothing, small enough that the
// in-order consumer starts early.
const yamlChunk = 128

// convertYAML turns each YAML document into JSON on every core, and runs
// prep (when not nil) on each converted document there too, while visit,
// called in document order on the calling goroutine, handles the ones
// already done with prep's result. Conversion (go-yaml's parser) is the
// larger half of loading a big dump, and decoding and validating a pod
// most of the rest; each document's is independent. prep must not touch
// the parser's state: what depends on earlier documents (merging,
// duplicates, workload budgets) stays in visit, so results and errors are
// those of a one-by-one loop. At most a few chunks per worker are held
// done but not yet visited.
//
// Strict: a key given twice in one mapping is an error, as it is for the
// API server, instead of the last one silently winning. go-yaml's alias
// budget makes "billion laughs" documents fail fast instead of expanding.
func convertYAML(parts []yamlPart, prep func(i int, raw []byte, tm *typeMeta) any, visit func(i int, raw []byte, err error, prepared any)) {
	type chunk struct {
		raw      [][]byte
		errs     []error
		prepared []any
		done     chan struct{}
	}
	// conv is one goroutine's fast reader, which gives go-yaml's bytes or
	// declines.
	convert := func(conv *blockConverter, i int) (raw []byte, prepared any, err error) {
		raw, tm, ok := parts[i].json, parts[i].tm, true
		if raw == nil {
			raw, tm, ok = conv.convert(parts[i].data)
		}
		if !ok {
			raw, err = yaml.YAMLToJSONStrict(parts[i].data)
		}
		if err == nil && prep != nil {
			prepared = prep(i, raw, tm)
		}
		return raw, prepared, err
	}
	n := (len(parts) + yamlChunk - 1) / yamlChunk
	if n <= 1 {
		var conv blockConverter
		for i := range parts {
			raw, prepared, err := convert(&conv, i)
			visit(i, raw, err, prepared)
		}
		return
	}
	chunks := make([]chunk, n)
	for c := range chunks {
		chunks[c].done = make(chan struct{})
	}
	workers := runtime.GOMAXPROCS(0)
	slots := make(chan struct{}, 2*workers) // chunks converted ahead of visit
	jobs := make(chan int)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var conv blockConverter
			for c := range jobs {
				lo, hi := c*yamlChunk, min((c+1)*yamlChunk, len(parts))
				ch := &chunks[c]
				ch.raw, ch.errs, ch.prepared = make([][]byte, hi-lo), make([]error, hi-lo), make([]any, hi-lo)
				for i := lo; i < hi; i++ {
					ch.raw[i-lo], ch.prepared[i-lo], ch.errs[i-lo] = convert(&conv, i)
				}
				close(ch.done)
			}
		}()
	}
	go func() {
		defer close(jobs)
		for c := range chunks {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			jobs <- c
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for c := range chunks {
		<-chunks[c].done
		for j, raw := range chunks[c].raw {
			visit(c*yamlChunk+j, raw, chunks[c].errs[j], chunks[c].prepared[j])
		}
		chunks[c] = chunk{} // let the converted documents go
		<-slots
	}
}
