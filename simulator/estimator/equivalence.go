package estimator

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// EquivalenceKey groups pods the scheduler treats alike: same controller
// and same scheduling-relevant spec. Pods with no controller are their own
// group unless their specs are identical. Identical pods share verdicts
// ("an empty node rejects it", "this node is full for it"). Claims are
// told apart by name: without the claims, a claim's name is all that
// says two pods ask the same.
func EquivalenceKey(pod *v1.Pod) string {
	h, _ := specHash(pod, nil)
	return equivalenceKey(pod, ownerUID(pod), h)
}

func equivalenceKey(pod *v1.Pod, owner string, hash uint64) string {
	return pod.Namespace + "/" + owner + "/" + strconv.FormatUint(hash, 16)
}

// Kinds memoizes EquivalenceKey per pod object; a planner computes each
// pod's key once however many node groups it tries. The zero value tells
// claims apart by name; NewKinds, by what they ask.
type Kinds struct {
	m map[*v1.Pod]*podKeys
	// claims looks up the claims and templates pods reference; nil: none.
	claims ClaimLister
	// users maps namespace/name of each claim the pods given to NewKinds
	// reference to the one pod (namespace/name) that does, "" when several
	// do.
	users map[string]string
}

// ClaimLister looks up ResourceClaims and ResourceClaimTemplates (nil when
// absent); *snapshot.Snapshot is one. Prepare reads it from several
// goroutines.
type ClaimLister interface {
	ResourceClaim(namespace, name string) *resourceapi.ResourceClaim
	ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate
}

// NewKinds returns Kinds under which a pod's own claims count by what they
// ask, not by name: pods whose fresh claims ask the same are alike, as
// pods asking the same extended resources are. Job operators create a
// claim per pod, so keyed by name no two such pods would share a verdict
// and each would be tried on every new node. A claim is the pod's own and
// fresh when no other pod in pods references it, it has no status (not
// allocated, not reserved) and is not being deleted, and, when generated
// from a template, it is owned by the pod; a template not generated yet
// counts by the template's spec. Other claims keep their name in the key:
// a shared claim is allocated once for all its pods. pods are all the
// pending pods; the claims of a pod not among them keep their names.
func NewKinds(claims ClaimLister, pods []*v1.Pod) *Kinds {
	k := &Kinds{claims: claims, users: map[string]string{}}
	for _, pod := range pods {
		for i := range pod.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			key, user := pod.Namespace+"/"+*name, pod.Namespace+"/"+pod.Name
			if u, ok := k.users[key]; ok && u != user {
				user = ""
			}
			k.users[key] = user
		}
	}
	return k
}

type podKeys struct {
	of, alike string // "" until asked for
	hash      uint64
	// ownNamed: every claim the pod names (resourceClaimName) is its own.
	ownNamed bool
}

func (k *Kinds) keys(pod *v1.Pod) *podKeys {
	if e, ok := k.m[pod]; ok {
		return e
	}
	if k.m == nil {
		k.m = map[*v1.Pod]*podKeys{}
	}
	e := &podKeys{}
	e.hash, e.ownNamed = specHash(pod, k.ownClaimSpec)
	k.m[pod] = e
	return e
}

// OwnsNamedClaims reports whether every claim the pod references by name
// is its own (see NewKinds): such a pod's placement may be copied to
// another node as a pod with a generated claim may.
func (k *Kinds) OwnsNamedClaims(pod *v1.Pod) bool { return k.keys(pod).ownNamed }

// ownClaimSpec returns what the pod's claim asks (JSON of its spec, which
// encoding/json writes in field order, map keys sorted) when the claim is
// the pod's own and fresh, else nil.
func (k *Kinds) ownClaimSpec(pod *v1.Pod, rc *v1.PodResourceClaim) []byte {
	if k.claims == nil {
		return nil
	}
	name, mustCheckOwner, err := resourceclaim.Name(pod, rc)
	if errors.Is(err, resourceclaim.ErrClaimNotFound) {
		// The resourceclaim controller (the placement engine, in a plan) makes
		// the pod a claim of its own from the template.
		t := k.claims.ResourceClaimTemplate(pod.Namespace, ptr.Deref(rc.ResourceClaimTemplateName, ""))
		if t == nil {
			return nil
		}
		return specJSON(&t.Spec.Spec)
	}
	if err != nil || name == nil || k.users[pod.Namespace+"/"+*name] != pod.Namespace+"/"+pod.Name {
		return nil
	}
	c := k.claims.ResourceClaim(pod.Namespace, *name)
	if c == nil || c.DeletionTimestamp != nil || !reflect.ValueOf(c.Status).IsZero() {
		return nil
	}
	if mustCheckOwner && resourceclaim.IsForPod(pod, c, false) != nil {
		return nil
	}
	return specJSON(&c.Spec)
}

func specJSON(spec *resourceapi.ResourceClaimSpec) []byte {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil
	}
	return b
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
		e.hash, e.ownNamed = specHash(pod, k.ownClaimSpec)
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

// specHash covers what scheduling reads: requests, claims, host ports,
// selectors, affinity, tolerations, topology spread, priority and
// scheduler name.
// ownSpec, when not nil, gives what a claim of the pod's own asks (nil for
// other claims, which count by name); ownNamed is whether every claim the
// pod names is its own.
func specHash(pod *v1.Pod, ownSpec func(*v1.Pod, *v1.PodResourceClaim) []byte) (hash uint64, ownNamed bool) {
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
				if p.HostIP != "" {
					// A port taken on one host IP is free on another. Only
					// when set, so that other pods' hashes stay as they were.
					w("@", p.HostIP)
				}
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
	ownNamed = true
	for i := range pod.Spec.ResourceClaims {
		rc := &pod.Spec.ResourceClaims[i]
		if ownSpec != nil {
			if spec := ownSpec(pod, rc); spec != nil {
				w("rc", rc.Name, "|spec|")
				_, _ = h.Write(spec)
				continue
			}
		}
		ownNamed = ownNamed && rc.ResourceClaimName == nil
		// Claims from the same template are alike; other claims by name.
		w("rc", rc.Name, "|", ptr.Deref(rc.ResourceClaimTemplateName, ""), "|", ptr.Deref(rc.ResourceClaimName, ""))
		if ownSpec != nil && rc.ResourceClaimTemplateName != nil {
			// Known claims: a generated claim that is not the pod's own
			// and fresh (allocated, say) keeps its identity too.
			if name, _, err := resourceclaim.Name(pod, rc); err == nil && name != nil {
				w("|", *name)
			}
		}
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
	return h.Sum64(), ownNamed
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
