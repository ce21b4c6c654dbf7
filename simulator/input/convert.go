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

// convertYAML turns each YAML document into JSON on every core while
// visit, called in document order on the calling goroutine, handles the
// ones already converted. Conversion (go-yaml's parser) is the larger
// half of loading a big dump and each document's is independent; what
// visit does (decoding, defaulting, validation, merging) stays sequential,
// so results and errors are those of a one-by-one loop. At most a few
// chunks per worker are held converted but not yet visited.
//
// Strict: a key given twice in one mapping is an error, as it is for the
// API server, instead of the last one silently winning. go-yaml's alias
// budget makes "billion laughs" documents fail fast instead of expanding.
func convertYAML(parts []yamlPart, visit func(i int, raw []byte, err error)) {
	type chunk struct {
		raw  [][]byte
		errs []error
		done chan struct{}
	}
	n := (len(parts) + yamlChunk - 1) / yamlChunk
	if n <= 1 {
		for i, part := range parts {
			raw, err := yaml.YAMLToJSONStrict(part.data)
			visit(i, raw, err)
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
			for c := range jobs {
				lo, hi := c*yamlChunk, min((c+1)*yamlChunk, len(parts))
				ch := &chunks[c]
				ch.raw, ch.errs = make([][]byte, hi-lo), make([]error, hi-lo)
				for i := lo; i < hi; i++ {
					ch.raw[i-lo], ch.errs[i-lo] = yaml.YAMLToJSONStrict(parts[i].data)
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
			visit(c*yamlChunk+j, raw, chunks[c].errs[j])
		}
		chunks[c] = chunk{} // let the converted documents go
		<-slots
	}
}
