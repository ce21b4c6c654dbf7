package classes

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Locked is an Index for one writer (an informer's event handler) and
// many concurrent readers (the scheduler's parallel Filter calls). Readers
// never lock: each change publishes a new immutable Mapping.
type Locked struct {
	mu      sync.Mutex // serializes writers
	idx     *Index
	current atomic.Pointer[Mapping]
}

// NewLocked returns an empty Locked index.
func NewLocked() *Locked {
	l := &Locked{idx: NewIndex()}
	l.current.Store(l.idx.Mapping())
	return l
}

// Set adds or replaces a class.
func (l *Locked) Set(class *resourceapi.DeviceClass) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx.Set(class)
	l.current.Store(l.idx.Mapping())
}

// Delete removes a class.
func (l *Locked) Delete(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx.Delete(name)
	l.current.Store(l.idx.Mapping())
}

// Current returns the mapping as of the last change.
func (l *Locked) Current() *Mapping { return l.current.Load() }

// GetDeviceClass implements fwk.DeviceClassResolver on the current mapping.
func (l *Locked) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	return l.Current().GetDeviceClass(name)
}
