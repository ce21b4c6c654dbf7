package input

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/resource"
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"

	// The install packages register the v1 defaulting functions and the
	// v1 <-> internal conversions with legacyscheme, as in the API server.
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
)

// addCoreKinds adds the handlers of the core and resource.k8s.io kinds.
func addCoreKinds(handlers map[string]handler) {
	// Namespaces come with dumps of a whole cluster; they place nothing,
	// so they are validated and not kept.
	handlers["v1/Namespace"] = func(p *parser, d doc, raw []byte) {
		ns := &v1.Namespace{}
		if obj, ok := p.prepare(d, raw, "Namespace", ns, false); ok {
			if errs := validated(ns, &core.Namespace{}, corevalidation.ValidateNamespace); len(errs) > 0 {
				p.fail(d, obj.String(), joinFieldErrors(errs))
			}
		}
	}
	handlers["v1/Node"] = storedKind[v1.Node]("Node", false, corevalidation.ValidateNode,
		func(o *Objects) *[]*v1.Node { return &o.Nodes })
	handlers["v1/Pod"] = func(p *parser, d doc, raw []byte) {
		p.commitPod(d, preparePod(d, raw))
	}
	// ConfigMaps hold template slices a node group references.
	handlers["v1/ConfigMap"] = storedKind[v1.ConfigMap]("ConfigMap", true, corevalidation.ValidateConfigMap,
		func(o *Objects) *[]*v1.ConfigMap { return &o.ConfigMaps })
	handlers["resource.k8s.io/v1/ResourceSlice"] = storedKind[resourceapi.ResourceSlice]("ResourceSlice", false, resourcevalidation.ValidateResourceSlice,
		func(o *Objects) *[]*resourceapi.ResourceSlice { return &o.ResourceSlices })
	handlers["resource.k8s.io/v1/DeviceClass"] = storedKind[resourceapi.DeviceClass]("DeviceClass", false, validateDeviceClass,
		func(o *Objects) *[]*resourceapi.DeviceClass { return &o.DeviceClasses })
	handlers["resource.k8s.io/v1/ResourceClaim"] = storedKind[resourceapi.ResourceClaim]("ResourceClaim", true, validateClaim,
		func(o *Objects) *[]*resourceapi.ResourceClaim { return &o.ResourceClaims })
	handlers["resource.k8s.io/v1/ResourceClaimTemplate"] = storedKind[resourceapi.ResourceClaimTemplate]("ResourceClaimTemplate", true,
		resourcevalidation.ValidateResourceClaimTemplate,
		func(o *Objects) *[]*resourceapi.ResourceClaimTemplate { return &o.ResourceClaimTemplates })
	handlers["resource.k8s.io/v1/DeviceTaintRule"] = storedKind[resourceapi.DeviceTaintRule]("DeviceTaintRule", false,
		resourcevalidation.ValidateDeviceTaintRule,
		func(o *Objects) *[]*resourceapi.DeviceTaintRule { return &o.DeviceTaintRules })
}

// storedKind is the handler of a kind that is decoded into V, validated
// as its internal type I and stored in the list of Objects that list
// picks.
func storedKind[V any, I any, PV interface {
	*V
	runtime.Object
	metav1.Object
}](kind string, namespaced bool, validate func(*I) field.ErrorList, list func(*Objects) *[]PV) handler {
	return func(p *parser, d doc, raw []byte) {
		obj := PV(new(V))
		if o, ok := p.prepare(d, raw, kind, obj, namespaced); ok {
			store(p, d, o, validated((*V)(obj), new(I), validate), list(p.out), obj)
		}
	}
}

// object is a decoded object and how errors name it ("Pod default/web").
type object struct {
	kind string
	meta metav1.Object
}

func (o object) String() string { return keyOf(o.kind, o.meta).String() }

// prepare decodes raw strictly into obj and does what the API server does
// before validating a create: namespace defaulting (cluster-scoped kinds
// lose a namespace, as BeforeCreate clears it), the scheme's defaulting,
// and a deterministic UID so that owner references by UID work offline.
// creationTimestamp is kept as given.
func (p *parser) prepare(d doc, raw []byte, kind string, obj runtime.Object, namespaced bool) (object, bool) {
	if err := decodeStrict(raw, obj); err != nil {
		p.fail(d, describe(kind, raw), err)
		return object{}, false
	}
	meta := obj.(metav1.Object)
	prepareMeta(kind, meta, namespaced, d.loc)
	legacyscheme.Scheme.Default(obj)
	return object{kind, meta}, true
}

func prepareMeta(kind string, meta metav1.Object, namespaced bool, loc string) {
	switch {
	case !namespaced:
		meta.SetNamespace("")
	case meta.GetNamespace() == "":
		meta.SetNamespace(metav1.NamespaceDefault)
	}
	if meta.GetName() == "" && meta.GetGenerateName() != "" {
		// What the API server's name generator does, but stable: the
		// suffix depends on where the object was defined.
		meta.SetName(meta.GetGenerateName() + suffix(loc))
	}
	if meta.GetUID() == "" {
		meta.SetUID(stableUID(keyOf(kind, meta).String()))
	}
}

// store reports errs, or adds obj to list unless it is a duplicate.
func store[T metav1.Object](p *parser, d doc, o object, errs field.ErrorList, list *[]T, obj T) bool {
	if len(errs) > 0 {
		p.fail(d, o.String(), joinFieldErrors(errs))
		return false
	}
	if err := add(p.out, list, o.kind, obj, d.loc); err != nil {
		p.fail(d, "", err)
		return false
	}
	return true
}

// joinFieldErrors keeps each field error separate, so that each gets the
// file and document prefix (an Aggregate would print them as one "[...]").
func joinFieldErrors(errs field.ErrorList) error {
	out := make([]error, len(errs))
	for i, e := range errs {
		if v, ok := e.BadValue.(string); ok && len(v) > 64 {
			short := *e
			short.BadValue = quoteShort(v)
			e = &short
		}
		out[i] = e
	}
	return errors.Join(out...)
}

// validated converts the v1 object to the internal type the API server
// validates and runs the kind's validation on it.
func validated[V any, I any](obj *V, internal *I, validate func(*I) field.ErrorList) field.ErrorList {
	if err := legacyscheme.Scheme.Convert(obj, internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("convert to internal type: %w", err))}
	}
	var errs field.ErrorList
	for _, e := range validate(internal) {
		// Privileged and hostProcess containers depend on the API server's
		// --allow-privileged, which kubeadm, kind and managed clusters set
		// (dumps hold kube-proxy and CNI pods); this process never set the
		// global it reads, so it would say false. Planning ignores it.
		if e.Type == field.ErrorTypeForbidden && strings.HasSuffix(e.Detail, "disallowed by cluster policy") {
			continue
		}
		errs = append(errs, e)
	}
	return errs
}

// preparedPod is a Pod document decoded, defaulted and validated: the
// part of loading a pod that needs no parser state, so that it runs on
// every core (see convertYAML).
type preparedPod struct {
	pod *v1.Pod
	// decodeErr is the strict decoding's error, named by what.
	decodeErr error
	what      string
	errs      field.ErrorList
}

// preparePod is the Pod handler's work up to storing: prepare and
// addPod's validation.
func preparePod(d doc, raw []byte) *preparedPod {
	pod := &v1.Pod{}
	if err := decodeStrictFast(raw, pod); err != nil {
		return &preparedPod{decodeErr: err, what: describe("Pod", raw)}
	}
	prepareMeta("Pod", pod, true, d.loc)
	legacyscheme.Scheme.Default(pod)
	return &preparedPod{pod: pod, errs: validated(pod, &core.Pod{}, validatePod)}
}

// commitPod reports a prepared pod's errors or stores it, in document
// order.
func (p *parser) commitPod(d doc, pp *preparedPod) {
	if pp.decodeErr != nil {
		p.fail(d, pp.what, pp.decodeErr)
		return
	}
	p.storePod(d, "", pp.pod, pp.errs)
}

// addPod validates a pod the way pod creation (and, for the status it
// carries, the status subresource) would, and files it as running or
// pending. Pods in phase Succeeded or Failed are dropped after validation:
// the scheduler's informers filter them out, so they hold no resources.
func (p *parser) addPod(d doc, owner string, pod *v1.Pod) bool {
	return p.storePod(d, owner, pod, validated(pod, &core.Pod{}, validatePod))
}

// storePod is addPod once the pod's validation errors are known.
func (p *parser) storePod(d doc, owner string, pod *v1.Pod, errs field.ErrorList) bool {
	o := object{"Pod", pod}
	what := o.String()
	if owner != "" {
		what = owner + ": " + what
	}
	if len(errs) > 0 {
		p.fail(d, what, joinFieldErrors(errs))
		return false
	}
	// Pods being bound are placed on their nodes once the claims are
	// read (PlaceBindingPods).
	filing := SimulateFiling(ClassifyPod(pod, nil))
	if filing == Dropped {
		return true
	}
	list := &p.out.PendingPods
	if filing == OnItsNode {
		list = &p.out.RunningPods
	}
	// A pod the input holds replaces the one its workload was expanded
	// into under the same name (a StatefulSet's ordinal pods).
	if owner == "" {
		p.out.dropGenerated(pod)
	}
	if err := add(p.out, list, "Pod", pod, d.loc); err != nil {
		p.fail(d, owner, err)
		return false
	}
	return true
}

// validatePod changes pod, which is validated's internal copy, instead of
// copying it for each check: pods are most of a large dump.
func validatePod(pod *core.Pod) field.ErrorList {
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&pod.Spec, nil, &pod.ObjectMeta, nil)
	opts.ResourceIsPod = true // as the pod strategy sets it
	// Ephemeral containers cannot be set on create; a dumped pod that got
	// one from `kubectl debug` went through the ephemeralcontainers
	// subresource, so validate them as that update.
	ephemeral := pod.Spec.EphemeralContainers
	pod.Spec.EphemeralContainers = nil
	errs := corevalidation.ValidatePodCreate(pod, opts)
	if len(ephemeral) > 0 {
		created := *pod
		pod.Spec.EphemeralContainers = ephemeral
		for _, e := range corevalidation.ValidatePodEphemeralContainersUpdate(pod, &created, opts) {
			if strings.HasPrefix(e.Field, "spec.ephemeralContainers") {
				errs = append(errs, e)
			}
		}
	}
	// The status a dump carries is checked as a status update from an
	// empty status. qosClass is immutable there, so it is carried over,
	// and so is a bound pod's nominatedNodeName: setting it on a bound pod
	// is refused now, but one stored earlier is not an error.
	asUpdate(&pod.ObjectMeta)
	old := *pod
	old.Status = core.PodStatus{QOSClass: pod.Status.QOSClass}
	if pod.Spec.NodeName != "" {
		old.Status.NominatedNodeName = pod.Status.NominatedNodeName
	}
	return appendNew(errs, corevalidation.ValidatePodStatusUpdate(pod, &old, opts))
}

// appendNew appends the errors of more that errs does not hold yet. An
// update's checks validate the metadata (labels, annotations, owner
// references, managed fields) again, and one bad label is one error.
func appendNew(errs, more field.ErrorList) field.ErrorList {
	if len(more) == 0 {
		return errs
	}
	seen := make(map[string]bool, len(errs)+len(more))
	for _, e := range errs {
		seen[e.Error()] = true
	}
	for _, e := range more {
		if msg := e.Error(); !seen[msg] {
			seen[msg] = true
			errs = append(errs, e)
		}
	}
	return errs
}

// asUpdate gives a hand-written object the resourceVersion every update
// carries, so that checking its status as an update does not fail on the
// missing version (the file is not an update request).
func asUpdate(meta *metav1.ObjectMeta) {
	if meta.ResourceVersion == "" {
		meta.ResourceVersion = "1"
	}
}

func validateClaim(claim *resource.ResourceClaim) field.ErrorList {
	errs := resourcevalidation.ValidateResourceClaim(claim)
	// An allocated claim from a dump is checked as the status update that
	// allocated it; reservedFor is carried over because adding entries is
	// forbidden once deletion started, which a dump may show.
	updated := *claim
	asUpdate(&updated.ObjectMeta)
	old := updated
	old.Status = resource.ResourceClaimStatus{ReservedFor: claim.Status.ReservedFor}
	return appendNew(errs, resourcevalidation.ValidateResourceClaimStatusUpdate(&updated, &old))
}

// celExpression is where DeviceClass validation reports a selector that
// does not compile or is too expensive.
var celExpression = regexp.MustCompile(`^spec\.selectors\[\d+\]\.cel\.expression$`)

// validateDeviceClass is the API server's DeviceClass validation except
// for CEL compilation (syntax, type and cost-limit errors): such a class
// can exist in a cluster (stored by an older server or under other feature
// gates, whose CEL environment differed), and the planner must report it
// for each pod that needs the class, as the scheduler does, rather than
// refuse the whole input. The length limit is still enforced.
func validateDeviceClass(class *resource.DeviceClass) field.ErrorList {
	var errs field.ErrorList
	for _, e := range resourcevalidation.ValidateDeviceClass(class) {
		if celExpression.MatchString(e.Field) && e.Type != field.ErrorTypeTooLong {
			continue
		}
		errs = append(errs, e)
	}
	return errs
}

// stableUID derives a UUID-shaped UID from a name, so that repeated loads
// of the same files give the same UIDs.
func stableUID(name string) types.UID {
	h := sha256.Sum256([]byte("draxr.dev/input:" + name))
	h[6] = h[6]&0x0f | 0x50 // version 5 layout (name-based)
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

// suffixAlphabet is the API server's name generator alphabet (no vowels,
// no confusable digits).
const suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// suffix returns 5 characters derived from seed, like a generated name's.
func suffix(seed string) string {
	h := sha256.Sum256([]byte(seed))
	b := make([]byte, 5)
	for i := range b {
		b[i] = suffixAlphabet[int(h[i])%len(suffixAlphabet)]
	}
	return string(b)
}
