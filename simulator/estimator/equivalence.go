package estimator

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// EquivalenceKey groups pods the scheduler treats alike: same controller
// and same scheduling-relevant spec. Pods with no controller are their own
// group unless their specs are identical. Identical pods share verdicts
// ("an empty node rejects it", "this node is full for it").
func EquivalenceKey(pod *v1.Pod) string {
	return equivalenceKey(pod, ownerUID(pod), specHash(pod))
}

func equivalenceKey(pod *v1.Pod, owner string, hash uint64) string {
	return pod.Namespace + "/" + owner + "/" + strconv.FormatUint(hash, 16)
}

// Kinds memoizes EquivalenceKey per pod object; a planner computes each
// pod's key once however many node groups it tries.
type Kinds struct{ m map[*v1.Pod]*podKeys }

type podKeys struct {
	of, alike string // "" until asked for
	hash      uint64
}

func (k *Kinds) keys(pod *v1.Pod) *podKeys {
	if e, ok := k.m[pod]; ok {
		return e
	}
	if k.m == nil {
		k.m = map[*v1.Pod]*podKeys{}
	}
	e := &podKeys{hash: specHash(pod)}
	k.m[pod] = e
	return e
}

// Prepare computes the keys of pods not seen yet on every core, so that
// Of and Alike only look them up, and may be called concurrently for
// these pods: a plan of 100,000 pending pods spends
// half a second hashing specs, and each pod's keys depend on that pod
// alone. The keys are those Of and Alike compute one by one.
func (k *Kinds) Prepare(pods []*v1.Pod) {
	if k.m == nil {
		k.m = make(map[*v1.Pod]*podKeys, len(pods))
	}
	var todo []*v1.Pod
	for _, pod := range pods {
		if _, ok := k.m[pod]; !ok {
			todo = append(todo, pod)
			continue
		}
		// Seen before: fill in what was not asked for yet, so that Of and
		// Alike never write (callers read them from several goroutines).
		k.Of(pod)
		k.Alike(pod)
	}
	keys := make([]podKeys, len(todo))
	workqueue.ParallelizeUntil(context.Background(), runtime.GOMAXPROCS(0), len(todo), func(i int) {
		pod, e := todo[i], &keys[i]
		e.hash = specHash(pod)
		e.of = equivalenceKey(pod, ownerUID(pod), e.hash)
		if readsLabels(pod) {
			e.alike = e.of
		} else {
			e.alike = equivalenceKey(pod, "", e.hash)
		}
	}, workqueue.WithChunkSize(256))
	for i, pod := range todo {
		if _, ok := k.m[pod]; !ok { // a pod listed twice keeps its first keys
			k.m[pod] = &keys[i]
		}
	}
}

func ownerUID(pod *v1.Pod) string {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return string(ref.UID)
	}
	return ""
}

// Of returns the pod's equivalence key.
func (k *Kinds) Of(pod *v1.Pod) string {
	e := k.keys(pod)
	if e.of == "" {
		e.of = equivalenceKey(pod, ownerUID(pod), e.hash)
	}
	return e.of
}

// Alike returns a key shared by pods that differ only in owner and labels
// when nothing can tell them apart: the pod has no inter-pod (anti-)
// affinity and no topology spread constraints. Other pods' affinity terms
// and a profile's default spread constraints can still select by labels;
// the caller uses Alike only when there are none (see BinPacking). Pods
// without such a key get their EquivalenceKey.
func (k *Kinds) Alike(pod *v1.Pod) string {
	e := k.keys(pod)
	if e.alike == "" {
		if readsLabels(pod) {
			e.alike = k.Of(pod)
		} else {
			e.alike = equivalenceKey(pod, "", e.hash)
		}
	}
	return e.alike
}

// readsLabels is true for pods whose own Filter verdicts depend on pod
// labels: inter-pod (anti-)affinity, and topology spreading (a pod counts
// itself when its labels match its selector).
func readsLabels(pod *v1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return true
	}
	return len(pod.Spec.TopologySpreadConstraints) > 0
}

// specHash covers what scheduling reads: requests, claims, selectors,
// affinity, tolerations, topology spread, priority and scheduler name.
func specHash(pod *v1.Pod) uint64 {
	h := fnv.New64a()
	// Writes the bytes fmt.Fprint wrote for the same strings (no spaces
	// between string operands), without its reflection.
	w := func(parts ...string) {
		for _, s := range parts {
			_, _ = io.WriteString(h, s)
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			w("c", c.Name, sortedList(c.Resources.Requests), sortedList(c.Resources.Limits), string(ptr.Deref(c.RestartPolicy, "")))
			for _, p := range c.Ports {
				w("p", strconv.Itoa(int(p.HostPort)), string(p.Protocol))
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
	if len(rl) == 0 {
		return ""
	}
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		q := rl[v1.ResourceName(k)]
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}
