package input

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Stdin is the path that reads standard input, as in kubectl's -f -.
const Stdin = "-"

// LoadPaths reads files and directories (recursively, *.yaml, *.yml,
// *.json, sorted) and merges them; "-" is standard input. A file named
// explicitly is read whatever its extension; a file reached twice is read
// once. All files are read even after an error, and every error is
// returned.
func LoadPaths(paths []string) (*Objects, error) {
	return Options{}.LoadPaths(paths)
}

// LoadPaths is LoadPaths with these options; MaxPods bounds all files
// together.
func (o Options) LoadPaths(paths []string) (*Objects, error) {
	if o.MaxPods == 0 {
		o.MaxPods = DefaultMaxPods
	}
	var files []string
	var errs []error
	seen := map[string]bool{}
	for _, path := range paths {
		found, err := expand(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range found {
			abs, err := filepath.Abs(f)
			if err != nil {
				abs = f
			}
			if !seen[abs] {
				seen[abs] = true
				files = append(files, f)
			}
		}
	}
	out := &Objects{}
	for _, f := range files {
		objs, err := o.loadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// The next files may expand only what this one left.
		if o.MaxPods -= int64(objs.expandedPods()); o.MaxPods <= 0 {
			o.MaxPods = -1
		}
		if out.count() == 0 && len(errs) == 0 {
			// Merging into nothing would re-file every object.
			out = objs
			continue
		}
		if err := out.Merge(objs); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out.reconcileWorkloads()
	out.PlaceBindingPods()
	out.TimeUntimedPods()
	return out, nil
}

// expand lists path itself, or the input files under it if it is a
// directory (filepath.WalkDir visits in lexical order).
func expand(path string) ([]string, error) {
	if path == Stdin {
		return []string{Stdin}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && isInputFile(p) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files in the directory", path)
	}
	return files, nil
}

func isInputFile(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func (o Options) loadFile(path string) (*Objects, error) {
	f := os.Stdin
	if path != Stdin {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, err
		}
		defer f.Close()
	} else {
		path = "stdin" // errors name the input as kubectl does
	}
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: file is %d bytes, more than the limit of %d bytes", path, info.Size(), MaxFileSize)
	}
	// Read one byte more than allowed, so a file that grew after the stat
	// (or a pipe) is detected without reading it all. A regular file's
	// size sizes the buffer, so it is not grown and copied while read.
	data, err := readUpTo(f, MaxFileSize+1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: file is more than the limit of %d bytes", path, MaxFileSize)
	}
	return o.parse(data, path)
}

// readUpTo reads r to its end or to limit bytes. A regular file's size
// sizes the buffer, so a large dump is not grown and copied while read.
func readUpTo(f *os.File, limit int64) ([]byte, error) {
	size := int64(512)
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
		size = min(info.Size()+1, limit) // +1 sees the end without growing
	}
	data := make([]byte, 0, size)
	for int64(len(data)) < limit {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(int64(cap(data)), limit)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}
