package estimator

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// EquivalenceKey groups pods the scheduler treats alike: same controller
// and same scheduling-relevant spec. Pods with no controller are their own
// group unless their specs are identical. Identical pods share verdicts
// ("an empty node rejects it", "this node is full for it").
func EquivalenceKey(pod *v1.Pod) string {
	owner := ""
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		owner = string(ref.UID)
	}
	return fmt.Sprintf("%s/%s/%x", pod.Namespace, owner, specHash(pod))
}

// Kinds memoizes EquivalenceKey per pod object; a planner computes each
// pod's key once however many node groups it tries.
type Kinds struct{ m map[*v1.Pod]string }

// Of returns the pod's equivalence key.
func (k *Kinds) Of(pod *v1.Pod) string {
	if key, ok := k.m[pod]; ok {
		return key
	}
	if k.m == nil {
		k.m = map[*v1.Pod]string{}
	}
	key := EquivalenceKey(pod)
	k.m[pod] = key
	return key
}

// specHash covers what scheduling reads: requests, claims, selectors,
// affinity, tolerations, topology spread, priority and scheduler name.
func specHash(pod *v1.Pod) uint64 {
	h := fnv.New64a()
	w := func(parts ...any) { fmt.Fprint(h, parts...) }
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			w("c", c.Name, sortedList(c.Resources.Requests), sortedList(c.Resources.Limits), ptr.Deref(c.RestartPolicy, ""))
			for _, p := range c.Ports {
				w("p", p.HostPort, p.Protocol)
			}
		}
		w("|")
	}
	w(pod.Spec.PriorityClassName, "|", pod.Spec.SchedulerName, "|", sortedList(pod.Spec.Overhead))
	// Nested pointers print as addresses, so structured fields go through
	// JSON; they are usually empty and then cost nothing.
	if pod.Spec.NodeSelector != nil || pod.Spec.Affinity != nil || len(pod.Spec.Tolerations) > 0 ||
		len(pod.Spec.TopologySpreadConstraints) > 0 || pod.Spec.Resources != nil {
		b, _ := json.Marshal([]any{pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations,
			pod.Spec.TopologySpreadConstraints, pod.Spec.Resources})
		_, _ = h.Write(b)
	}
	for _, rc := range pod.Spec.ResourceClaims {
		// Claims from the same template are alike; named claims are not.
		w("rc", rc.Name, "|", ptr.Deref(rc.ResourceClaimTemplateName, ""), "|", ptr.Deref(rc.ResourceClaimName, ""))
	}
	// Only volumes that bind cluster-wide matter; others (the projected
	// ServiceAccount token volume has a random name per pod) do not.
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim != nil:
			w("pvc", vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			w("ephemeral", vol.Name)
		}
	}
	return h.Sum64()
}

func sortedList(rl v1.ResourceList) string {
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		q := rl[v1.ResourceName(k)]
		s += k + "=" + q.String() + ","
	}
	return s
}
