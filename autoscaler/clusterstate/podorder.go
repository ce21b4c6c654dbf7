package clusterstate

import (
	"cmp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// comparePods orders pods by namespace, then name. Compared field by
// field: building "ns/name" strings in the comparison allocated twice per
// comparison, a tenth of a 50,000-pod loop.
func comparePods(a, b *v1.Pod) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// podOrder sorts each loop's pods as the last loop's sort left them: the
// lister hands them over in map order, and sorting 50,000 pods from
// scratch was a sixth of a quiet loop. Pods seen last loop (the same
// object: the informer replaces a pod that changes, never edits it) keep
// their order; only the others are sorted, then merged in. The result is
// checked to be in order before it is used, so an object edited in place
// costs a full sort, never a wrong order.
type podOrder struct {
	// last is the last loop's pods in order (a copy: the loop's own list
	// is handed out), pos each one's index in it.
	last []*v1.Pod
	pos  map[*v1.Pod]int
}

// sort sorts pods in place by comparePods and remembers their order.
func (o *podOrder) sort(pods []*v1.Pod) {
	if !o.reuse(pods) {
		slices.SortFunc(pods, comparePods)
		o.remember(pods)
	}
}

// reuse sorts pods from the last order; false when it could not.
func (o *podOrder) reuse(pods []*v1.Pod) bool {
	if len(o.last) == 0 {
		return false
	}
	kept := make([]bool, len(o.last))
	var fresh []*v1.Pod
	for _, p := range pods {
		if i, ok := o.pos[p]; ok && !kept[i] {
			kept[i] = true
		} else {
			fresh = append(fresh, p)
		}
	}
	slices.SortFunc(fresh, comparePods)
	// Merge the pods kept, in their last order, with the fresh ones.
	out, f := pods[:0], 0
	for i, p := range o.last {
		if !kept[i] {
			continue
		}
		for f < len(fresh) && comparePods(fresh[f], p) < 0 {
			out, f = append(out, fresh[f]), f+1
		}
		out = append(out, p)
	}
	out = append(out, fresh[f:]...)
	if !slices.IsSortedFunc(out, comparePods) {
		return false
	}
	if len(fresh) > 0 || len(out) != len(o.last) {
		o.remember(out)
	}
	return true
}

// remember keeps pods' order for the next loop.
func (o *podOrder) remember(pods []*v1.Pod) {
	o.last = slices.Clone(pods)
	o.pos = make(map[*v1.Pod]int, len(pods))
	for i, p := range pods {
		o.pos[p] = i
	}
}
