package clusterstate

// Versioned is an API object as the informers hand it out: a pointer,
// with the resourceVersion the API server changes with any change.
type Versioned interface {
	comparable
	GetResourceVersion() string
}

// SameObjects tells whether a list holds the very objects of the list
// it was last given: the same pointers (an informer replaces an object
// that changes, never edits it) at the same resourceVersions, in any
// order. What is computed from such a list alone may then be reused.
// An object without a resourceVersion is never the same.
type SameObjects[T Versioned] struct {
	last map[T]*seenObject
	call int
}

type seenObject struct {
	resourceVersion string
	call            int // the last call that found it, to catch duplicates
}

// Same reports whether list holds the objects of the last call's list,
// and remembers list for the next call.
func (s *SameObjects[T]) Same(list []T) bool {
	s.call++
	if s.last != nil && len(list) == len(s.last) && s.found(list) {
		return true
	}
	s.last = make(map[T]*seenObject, len(list))
	for _, o := range list {
		s.last[o] = &seenObject{resourceVersion: o.GetResourceVersion(), call: s.call}
	}
	return false
}

// found reports every object of list in last, once each, at the version
// remembered.
func (s *SameObjects[T]) found(list []T) bool {
	for _, o := range list {
		seen, ok := s.last[o]
		if !ok || seen.call == s.call || seen.resourceVersion == "" || seen.resourceVersion != o.GetResourceVersion() {
			return false
		}
		seen.call = s.call
	}
	return true
}
