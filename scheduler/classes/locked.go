package classes

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Locked is an Index safe for one writer (an informer's event handler) and
// many concurrent readers (the scheduler's parallel Filter calls).
type Locked struct {
	mu  sync.RWMutex
	idx *Index
}

// NewLocked returns an empty Locked index.
func NewLocked() *Locked { return &Locked{idx: NewIndex()} }

// Set adds or replaces a class.
func (l *Locked) Set(class *resourceapi.DeviceClass) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx.Set(class)
}

// Delete removes a class.
func (l *Locked) Delete(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx.Delete(name)
}

// GetDeviceClass implements fwk.DeviceClassResolver.
func (l *Locked) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.idx.GetDeviceClass(name)
}
