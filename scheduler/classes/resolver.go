// Package classes indexes DeviceClasses and resolves extended resource names
// to the DeviceClass that backs them, following KEP-5004.
//
// Upstream's ExtendedResourceCache (k8s.io/dynamic-resource-allocation
// v0.36.3) depends on the order in which it sees classes: the loser of a
// name clash loses its implicit name, and deleting or clearing one class can
// drop the other's mapping. This index keeps every candidate per name and
// recomputes only the names a change touches, so lookups stay O(1) and the
// answer depends only on the current set of classes.
package classes

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ImplicitPrefix is the prefix of the extended resource name every
// DeviceClass gets implicitly: deviceclass.resource.kubernetes.io/<class>.
const ImplicitPrefix = "deviceclass.resource.kubernetes.io/"

// ImplicitName returns the implicit extended resource name of a class.
func ImplicitName(className string) v1.ResourceName {
	return v1.ResourceName(ImplicitPrefix + className)
}

// Index holds DeviceClasses by name and the extended resource name mapping.
// It implements the scheduler framework's DeviceClassLister and
// DeviceClassResolver. It is not safe for concurrent mutation; readers may
// run concurrently with each other.
type Index struct {
	byName map[string]*resourceapi.DeviceClass
	// candidates lists, per explicit extended resource name, every class
	// that names it; the winner is cached in winners.
	candidates map[v1.ResourceName]map[string]*resourceapi.DeviceClass
	winners    map[v1.ResourceName]*resourceapi.DeviceClass
	// explicit records the explicit name each class was indexed under, so
	// a class object edited in place before Set is still dropped from the
	// right candidate set.
	explicit map[string]v1.ResourceName
	sorted   []*resourceapi.DeviceClass // nil when stale
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		byName:     map[string]*resourceapi.DeviceClass{},
		candidates: map[v1.ResourceName]map[string]*resourceapi.DeviceClass{},
		winners:    map[v1.ResourceName]*resourceapi.DeviceClass{},
		explicit:   map[string]v1.ResourceName{},
	}
}

// Set adds or replaces a class and returns the class it replaced, if any.
func (x *Index) Set(class *resourceapi.DeviceClass) (previous *resourceapi.DeviceClass) {
	previous = x.byName[class.Name]
	if previous != nil {
		x.dropCandidate(previous.Name)
	}
	x.byName[class.Name] = class
	if name := explicitName(class); name != "" {
		x.explicit[class.Name] = name
		if x.candidates[name] == nil {
			x.candidates[name] = map[string]*resourceapi.DeviceClass{}
		}
		x.candidates[name][class.Name] = class
		x.recompute(name)
	}
	x.sorted = nil
	return previous
}

// Delete removes a class and returns it, or nil if it was not there.
func (x *Index) Delete(className string) *resourceapi.DeviceClass {
	previous := x.byName[className]
	if previous == nil {
		return nil
	}
	delete(x.byName, className)
	x.dropCandidate(className)
	x.sorted = nil
	return previous
}

func (x *Index) dropCandidate(className string) {
	name, ok := x.explicit[className]
	if !ok {
		return
	}
	delete(x.explicit, className)
	delete(x.candidates[name], className)
	if len(x.candidates[name]) == 0 {
		delete(x.candidates, name)
	}
	x.recompute(name)
}

// recompute picks the winner for one explicit name: the newest
// creationTimestamp, and on a tie the lexicographically first class name.
func (x *Index) recompute(name v1.ResourceName) {
	var best *resourceapi.DeviceClass
	for _, c := range x.candidates[name] {
		if best == nil || newerOrFirst(c, best) {
			best = c
		}
	}
	if best == nil {
		delete(x.winners, name)
		return
	}
	x.winners[name] = best
}

func newerOrFirst(a, b *resourceapi.DeviceClass) bool {
	at, bt := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !at.Equal(bt) {
		return at.After(bt)
	}
	return a.Name < b.Name
}

func explicitName(class *resourceapi.DeviceClass) v1.ResourceName {
	if class.Spec.ExtendedResourceName == nil {
		return ""
	}
	return v1.ResourceName(*class.Spec.ExtendedResourceName)
}

// GetDeviceClass implements fwk.DeviceClassResolver: the class backing an
// extended resource name, or nil.
func (x *Index) GetDeviceClass(resourceName v1.ResourceName) *resourceapi.DeviceClass {
	if c := x.winners[resourceName]; c != nil {
		return c
	}
	s := string(resourceName)
	if len(s) > len(ImplicitPrefix) && s[:len(ImplicitPrefix)] == ImplicitPrefix {
		return x.byName[s[len(ImplicitPrefix):]]
	}
	return nil
}

// Get implements fwk.DeviceClassLister.
func (x *Index) Get(className string) (*resourceapi.DeviceClass, error) {
	if c := x.byName[className]; c != nil {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), className)
}

// List implements fwk.DeviceClassLister; classes are sorted by name.
func (x *Index) List() ([]*resourceapi.DeviceClass, error) {
	if x.sorted == nil {
		x.sorted = make([]*resourceapi.DeviceClass, 0, len(x.byName))
		for _, c := range x.byName {
			x.sorted = append(x.sorted, c)
		}
		sort.Slice(x.sorted, func(i, j int) bool { return x.sorted[i].Name < x.sorted[j].Name })
	}
	return x.sorted, nil
}

// ResourceNames returns every extended resource name the class currently
// answers to: its implicit name, and its explicit name if it wins it.
func (x *Index) ResourceNames(className string) []v1.ResourceName {
	class := x.byName[className]
	if class == nil {
		return nil
	}
	names := []v1.ResourceName{ImplicitName(className)}
	if name := x.explicit[className]; name != "" && x.winners[name] == class {
		names = append([]v1.ResourceName{name}, names...)
	}
	return names
}

// Mapping is one immutable view of which class backs which extended
// resource name. A scheduling cycle reads one Mapping from PreFilter to
// PreBind, so a class change mid-cycle cannot make two plugins disagree
// about whether a name is DRA-backed.
type Mapping struct {
	byResource map[v1.ResourceName]*resourceapi.DeviceClass
}

// Mapping returns the current resolution as an immutable view. It costs one
// map entry per class and per explicit name: classes are few and change
// rarely, so each change publishes a fresh view instead of locking readers.
func (x *Index) Mapping() *Mapping {
	m := make(map[v1.ResourceName]*resourceapi.DeviceClass, len(x.byName)+len(x.winners))
	for name, c := range x.byName {
		m[ImplicitName(name)] = c
	}
	for name, c := range x.winners {
		m[name] = c
	}
	return &Mapping{byResource: m}
}

// GetDeviceClass implements fwk.DeviceClassResolver on the view; a nil
// Mapping resolves nothing.
func (m *Mapping) GetDeviceClass(resourceName v1.ResourceName) *resourceapi.DeviceClass {
	if m == nil {
		return nil
	}
	return m.byResource[resourceName]
}
