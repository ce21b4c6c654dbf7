package provreq

import (
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/utils/ptr"

	// Registers the v1 defaulting functions with legacyscheme.
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// Templates finds a PodTemplate by namespace and name (nil when absent).
type Templates func(namespace, name string) *v1.PodTemplate

// InvalidError is a request draxr cannot build pods for: its message
// names the object and the field. The request fails with
// FailedToCreatePods.
type InvalidError struct {
	Request string
	Field   string
	Detail  string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("ProvisioningRequest %s: %s: %s", e.Request, e.Field, e.Detail)
}

// className is the CRD's pattern for provisioningClassName.
var className = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Validate checks what the CRD checks (a request from a dump did not pass
// the API server), and draxr's MaxPods.
func Validate(pr *prv1.ProvisioningRequest) error {
	bad := func(field, format string, args ...any) error {
		return &InvalidError{Request: Key(pr), Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	if c := pr.Spec.ProvisioningClassName; c == "" || len(c) > 253 || !className.MatchString(c) {
		return bad("spec.provisioningClassName", "%q is not a DNS subdomain of at most 253 characters", c)
	}
	if n := len(pr.Spec.PodSets); n < 1 || n > 32 {
		return bad("spec.podSets", "has %d entries, must have 1 to 32", n)
	}
	if n := len(pr.Spec.Parameters); n > 100 {
		return bad("spec.parameters", "has %d keys, at most 100", n)
	}
	for k, v := range pr.Spec.Parameters {
		if len(v) > 255 {
			return bad("spec.parameters["+k+"]", "is %d characters long, at most 255", len(v))
		}
	}
	total := 0
	for i, ps := range pr.Spec.PodSets {
		f := fmt.Sprintf("spec.podSets[%d]", i)
		if ps.Count < 1 {
			return bad(f+".count", "must be at least 1, got %d", ps.Count)
		}
		if errs := validation.IsDNS1123Subdomain(ps.PodTemplateRef.Name); len(errs) > 0 {
			return bad(f+".podTemplateRef.name", "%q: %s", ps.PodTemplateRef.Name, strings.Join(errs, "; "))
		}
		total += int(ps.Count)
	}
	if total > MaxPods {
		return bad("spec.podSets[*].count", "the request stands for %d pods; draxr plans at most %d per request", total, MaxPods)
	}
	return nil
}

// Pods returns the in-memory pods pr stands for: count copies of each
// podSet's PodTemplate, named <request>-<podSet>-<index>, in the
// request's namespace, owned by it and annotated as consuming it (as
// CA's are), created when the request was. Their UIDs are derived from
// the name, so claims the placement engine makes for them from
// ResourceClaimTemplates get the same names in every loop. A missing
// PodTemplate is an InvalidError naming the podSet.
func Pods(pr *prv1.ProvisioningRequest, templates Templates) ([]*v1.Pod, error) {
	if err := Validate(pr); err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, TotalPods(pr))
	owner := metav1.OwnerReference{APIVersion: prv1.SchemeGroupVersion.String(), Kind: "ProvisioningRequest",
		Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}
	for i, ps := range pr.Spec.PodSets {
		tmpl := templates(pr.Namespace, ps.PodTemplateRef.Name)
		if tmpl == nil {
			return nil, &InvalidError{Request: Key(pr), Field: fmt.Sprintf("spec.podSets[%d].podTemplateRef.name", i),
				Detail: fmt.Sprintf("PodTemplate %s/%s not found", pr.Namespace, ps.PodTemplateRef.Name)}
		}
		for j := 0; j < int(ps.Count); j++ {
			pod := &v1.Pod{
				ObjectMeta: *tmpl.Template.ObjectMeta.DeepCopy(),
				Spec:       *tmpl.Template.Spec.DeepCopy(),
			}
			pod.Name = fmt.Sprintf("%s-%d-%d", pr.Name, i, j)
			pod.GenerateName = ""
			pod.Namespace = pr.Namespace
			pod.UID = types.UID(pr.Namespace + "/" + pod.Name)
			pod.CreationTimestamp = pr.CreationTimestamp
			pod.OwnerReferences = []metav1.OwnerReference{owner}
			pod.ResourceVersion = ""
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[ConsumeAnnotation] = pr.Name
			pod.Annotations[ClassAnnotation] = pr.Spec.ProvisioningClassName
			pod.Status = v1.PodStatus{Phase: v1.PodPending}
			// What the API server does to a pod it creates (a PodTemplate
			// from a dump may not have been through it).
			legacyscheme.Scheme.Default(pod)
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// IsRequestPod says whether pod is one of Pods' in-memory pods (owned by
// a ProvisioningRequest), never a pod of the cluster.
func IsRequestPod(pod *v1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "ProvisioningRequest" && strings.HasPrefix(o.APIVersion, prv1.GroupName+"/") {
			return true
		}
	}
	return false
}

// PodSetOf says which podSet of pr a real consuming pod belongs to: the
// first whose template asks for the same container resources and claims,
// else the first that still has room (counts left by podSet, taken from).
func PodSetOf(pod *v1.Pod, pr *prv1.ProvisioningRequest, templates Templates, left []int) int {
	for i, ps := range pr.Spec.PodSets {
		if left[i] <= 0 {
			continue
		}
		if t := templates(pr.Namespace, ps.PodTemplateRef.Name); t != nil && sameAsk(&t.Template.Spec, &pod.Spec) {
			return i
		}
	}
	for i := range left {
		if left[i] > 0 {
			return i
		}
	}
	return -1
}

// sameAsk compares what two pod specs ask of a node: container requests
// and limits, and claims by template or name.
func sameAsk(a, b *v1.PodSpec) bool {
	if len(a.Containers) != len(b.Containers) || len(a.ResourceClaims) != len(b.ResourceClaims) {
		return false
	}
	for i := range a.Containers {
		ra, rb := a.Containers[i].Resources, b.Containers[i].Resources
		if !sameList(ra.Requests, rb.Requests) || !sameList(ra.Limits, rb.Limits) {
			return false
		}
	}
	for i := range a.ResourceClaims {
		ca, cb := a.ResourceClaims[i], b.ResourceClaims[i]
		if ca.Name != cb.Name || ptr.Deref(ca.ResourceClaimTemplateName, "") != ptr.Deref(cb.ResourceClaimTemplateName, "") ||
			ptr.Deref(ca.ResourceClaimName, "") != ptr.Deref(cb.ResourceClaimName, "") {
			return false
		}
	}
	return true
}

func sameList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if o, ok := b[k]; !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
