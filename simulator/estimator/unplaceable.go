package estimator

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"draxr.dev/draxr/simulator/placement"
)

// Unplaceable remembers, through a pass over nodes that only fill up, the
// pods that fit no node, so that a pod Filter cannot tell from one of them
// is not tried again: thousands of pods no node takes cost one try.
//
// Pods of one kind (Kinds.Of) ask alike: the same claims or claims asking
// the same, the same volume claims, host ports, selectors and terms. Their
// labels may still differ (a StatefulSet's pod-name, a Job's completion
// index, bare pods of one spec), and Filter reads a pod's labels where a
// placed pod's required anti-affinity selects on them, and where the pod's
// own affinity term or spread constraint counts the pod itself. The
// labels those selectors read join the key; pods whose labels nothing
// reads are keyed by kind.
type Unplaceable struct {
	eng   *placement.Engine
	kinds *Kinds
	pods  []*v1.Pod
	// failed are the keys of the pods that fit nowhere; failedKinds their
	// kinds, so that a pod of another kind needs no key built.
	failed, failedKinds map[string]bool
	// Read when the first pod fails (built), not before: a pass in which
	// every pod fits never needs them.
	built bool
	// read are the label keys the required anti-affinity of a placed pod or
	// of one of pods (placed later in the pass) selects on, sorted.
	read []string
	// all: every label counts (the profile spreads by default, by
	// selectors draxr does not see, or the placed pods cannot be listed).
	all bool
	// own are, by kind, read and the keys the kind's own terms read.
	own map[string][]string
	buf []byte // the last key built
}

// NewUnplaceable starts a pass that places pods (the pass's pending pods,
// in any order) over the engine's nodes.
func NewUnplaceable(eng *placement.Engine, kinds *Kinds, pods []*v1.Pod) *Unplaceable {
	return &Unplaceable{eng: eng, kinds: kinds, pods: pods, failed: map[string]bool{}, failedKinds: map[string]bool{}}
}

// Add records that pod fit no node.
func (u *Unplaceable) Add(pod *v1.Pod) {
	u.buf = u.appendKey(u.buf[:0], pod)
	u.failed[string(u.buf)] = true
	u.failedKinds[u.kinds.Of(pod)] = true
}

// Holds reports whether a pod Filter cannot tell from pod fit no node.
func (u *Unplaceable) Holds(pod *v1.Pod) bool {
	if !u.failedKinds[u.kinds.Of(pod)] {
		return false
	}
	u.buf = u.appendKey(u.buf[:0], pod)
	return u.failed[string(u.buf)] // looked up without a copy
}

// appendKey appends the pod's key: its kind, then its values of the label
// keys read.
func (u *Unplaceable) appendKey(b []byte, pod *v1.Pod) []byte {
	kind := u.kinds.Of(pod)
	b = append(b, kind...)
	u.build()
	if u.all {
		return append(append(b, 0), labels.Set(pod.Labels).String()...)
	}
	keys := u.read
	if readsLabels(pod) {
		// The spec, terms included, is in the kind: one list per kind.
		var ok bool
		if keys, ok = u.own[kind]; !ok {
			keys = ownLabelKeys(pod, u.read)
			u.own[kind] = keys
		}
	}
	for _, k := range keys {
		// NUL is in no label key or value; "=" tells a value from none.
		b = append(append(b, 0), k...)
		if v, ok := pod.Labels[k]; ok {
			b = append(append(b, '='), v...)
		}
	}
	return b
}

func (u *Unplaceable) build() {
	if u.built {
		return
	}
	u.built = true
	u.own = map[string][]string{}
	if u.eng.SpreadsByDefault() {
		u.all = true
		return
	}
	var keys []string
	withAnti, err := u.eng.Snapshot().NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if err != nil {
		u.all = true
		return
	}
	for _, ni := range withAnti {
		for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
			keys = antiAffinityKeys(pi.GetPod(), keys)
		}
	}
	for _, pod := range u.pods {
		keys = antiAffinityKeys(pod, keys)
	}
	slices.Sort(keys)
	u.read = slices.Compact(keys)
}

// antiAffinityKeys adds the label keys the pod's required anti-affinity
// selects other pods on.
func antiAffinityKeys(pod *v1.Pod, keys []string) []string {
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			keys = termKeys(&a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i], keys)
		}
	}
	return keys
}

// ownLabelKeys is read and the label keys by which the pod's required
// affinity (a pod matching its own term may go where no other matches) and
// its hard spread constraints (a pod counts itself where it matches) read
// the pod's own labels; sorted.
func ownLabelKeys(pod *v1.Pod, read []string) []string {
	keys := slices.Clone(read)
	if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
		for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			keys = termKeys(&a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i], keys)
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != v1.DoNotSchedule {
			continue // it only scores
		}
		keys = selectorKeys(c.LabelSelector, keys)
		keys = append(keys, c.MatchLabelKeys...)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// termKeys adds the label keys the term selects on. matchLabelKeys and
// mismatchLabelKeys count too, for pods the API server did not merge them
// for.
func termKeys(t *v1.PodAffinityTerm, keys []string) []string {
	keys = selectorKeys(t.LabelSelector, keys)
	keys = append(keys, t.MatchLabelKeys...)
	return append(keys, t.MismatchLabelKeys...)
}

func selectorKeys(s *metav1.LabelSelector, keys []string) []string {
	if s == nil {
		return keys
	}
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	for _, r := range s.MatchExpressions {
		keys = append(keys, r.Key)
	}
	return keys
}
