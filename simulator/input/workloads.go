package input

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/apis/batch"
	batchvalidation "k8s.io/kubernetes/pkg/apis/batch/validation"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
)

// maxGeneratedBase is the API server's limit on the generateName part of a
// generated name (63 minus the 5-character suffix).
const maxGeneratedBase = 58

// addWorkloadKinds adds the handlers of the workloads whose pods the
// input expands.
func addWorkloadKinds(handlers map[string]handler) {
	handlers["apps/v1/Deployment"] = parseDeployment
	handlers["apps/v1/ReplicaSet"] = parseReplicaSet
	handlers["apps/v1/DaemonSet"] = parseDaemonSet
	handlers["apps/v1/StatefulSet"] = parseStatefulSet
	handlers["batch/v1/Job"] = parseJob
}

func parseDeployment(p *parser, d doc, raw []byte) {
	w := &appsv1.Deployment{}
	if o, ok := p.prepare(d, raw, "Deployment", w, true); ok {
		errs := validated(w, &apps.Deployment{}, func(in *apps.Deployment) field.ErrorList {
			return appsvalidation.ValidateDeployment(in, podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil))
		})
		p.expand(d, o, errs, &w.Spec.Template, int64(*w.Spec.Replicas), hashNames)
	}
}

func parseReplicaSet(p *parser, d doc, raw []byte) {
	w := &appsv1.ReplicaSet{}
	if o, ok := p.prepare(d, raw, "ReplicaSet", w, true); ok {
		errs := validated(w, &apps.ReplicaSet{}, func(in *apps.ReplicaSet) field.ErrorList {
			return appsvalidation.ValidateReplicaSet(in, podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil))
		})
		p.expand(d, o, errs, &w.Spec.Template, int64(*w.Spec.Replicas), hashNames)
	}
}

// parseDaemonSet stores the DaemonSet rather than expanding it: its pods
// follow the nodes, not a replica count.
func parseDaemonSet(p *parser, d doc, raw []byte) {
	w := &appsv1.DaemonSet{}
	if o, ok := p.prepare(d, raw, "DaemonSet", w, true); ok {
		errs := validated(w, &apps.DaemonSet{}, func(in *apps.DaemonSet) field.ErrorList {
			return appsvalidation.ValidateDaemonSet(in, podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil))
		})
		store(p, d, o, errs, &p.out.DaemonSets, w)
	}
}

func parseStatefulSet(p *parser, d doc, raw []byte) {
	w := &appsv1.StatefulSet{}
	if o, ok := p.prepare(d, raw, "StatefulSet", w, true); ok {
		errs := validated(w, &apps.StatefulSet{}, func(in *apps.StatefulSet) field.ErrorList {
			// As the StatefulSet strategy validates a new object.
			setOpts := appsvalidation.StatefulSetValidationOptions{
				AllowStatefulSetRecreateStrategy: utilfeature.DefaultFeatureGate.Enabled(features.StatefulSetRecreateStrategy),
			}
			return appsvalidation.ValidateStatefulSet(in, setOpts, podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil))
		})
		// The StatefulSet controller names pods by ordinal and sets
		// their hostname, subdomain and identity labels. Volumes from
		// volumeClaimTemplates are not added: the input holds no PVCs.
		start := int64(0)
		if w.Spec.Ordinals != nil {
			start = int64(w.Spec.Ordinals.Start)
		}
		p.expand(d, o, errs, &w.Spec.Template, int64(*w.Spec.Replicas), func(i int64, pod *v1.Pod) {
			ord := strconv.FormatInt(start+i, 10)
			pod.Name = w.Name + "-" + ord
			pod.Spec.Hostname, pod.Spec.Subdomain = pod.Name, w.Spec.ServiceName
			pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
			pod.Labels[appsv1.PodIndexLabel] = ord
		})
	}
}

func parseJob(p *parser, d doc, raw []byte) {
	w := &batchv1.Job{}
	if o, ok := p.prepare(d, raw, "Job", w, true); ok {
		if !*w.Spec.ManualSelector {
			generateJobSelector(w)
		}
		errs := validated(w, &batch.Job{}, func(in *batch.Job) field.ErrorList {
			return batchvalidation.ValidateJobCreate(in, batchvalidation.JobValidationOptions{
				PodValidationOptions:  podutil.GetValidationOptionsFromPodTemplate(&in.Spec.Template, nil),
				RequirePrefixedLabels: true, // as the Job strategy sets it on create
			})
		})
		// Pods running at once: parallelism, but no more than there
		// are completions; a suspended Job runs none.
		n := int64(*w.Spec.Parallelism)
		if w.Spec.Completions != nil {
			n = min(n, int64(*w.Spec.Completions))
		}
		if ptr.Deref(w.Spec.Suspend, false) {
			n = 0
			if w.Labels[KueueQueueLabel] != "" && len(errs) == 0 {
				p.out.QueuedJobs = append(p.out.QueuedJobs, w)
			}
		}
		indexed := ptr.Deref(w.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
		p.expand(d, o, errs, &w.Spec.Template, n, func(i int64, pod *v1.Pod) {
			if !indexed {
				hashNames(i, pod)
				return
			}
			idx := strconv.FormatInt(i, 10)
			hashNames(i, pod)
			pod.Name = generated(w.Name+"-"+idx+"-", pod.Name)
			pod.Spec.Hostname = w.Name + "-" + idx
			pod.Annotations[batchv1.JobCompletionIndexAnnotation] = idx
			pod.Labels[batchv1.JobCompletionIndexAnnotation] = idx
		})
	}
}

// generateJobSelector is what the Job strategy's PrepareForCreate does for
// a Job without a manual selector: label the template with the job name
// and UID and select on the UID. Labels already present are kept.
func generateJobSelector(w *batchv1.Job) {
	if w.Spec.Template.Labels == nil {
		w.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		"job-name": w.Name, batchv1.JobNameLabel: w.Name,
		"controller-uid": string(w.UID), batchv1.ControllerUidLabel: string(w.UID),
	} {
		if _, found := w.Spec.Template.Labels[k]; !found {
			w.Spec.Template.Labels[k] = v
		}
	}
	if w.Spec.Selector == nil {
		w.Spec.Selector = &metav1.LabelSelector{}
	}
	if w.Spec.Selector.MatchLabels == nil {
		w.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, found := w.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !found {
		w.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(w.UID)
	}
}

// hashNames names pod i "<workload>-<5 characters>", the suffix derived
// from the workload and i, like the ReplicaSet and Job controllers' names.
func hashNames(i int64, pod *v1.Pod) {
	ref := metav1.GetControllerOf(pod)
	pod.Name = generated(ref.Name+"-", fmt.Sprintf("%s/%s/%s/%d", ref.Kind, pod.Namespace, ref.Name, i))
}

// generated is base (truncated as the API server's name generator does)
// plus a 5-character suffix derived from seed.
func generated(base, seed string) string {
	if len(base) > maxGeneratedBase {
		base = base[:maxGeneratedBase]
	}
	return base + suffix(seed)
}

// expand turns a validated workload into the pending pods its controller
// would create: template labels, annotations and spec, the workload's
// namespace and creationTimestamp, and a controller owner reference to it.
// name sets each pod's name (and any per-pod fields).
func (p *parser) expand(d doc, w object, errs field.ErrorList, tmpl *v1.PodTemplateSpec, n int64, name func(int64, *v1.Pod)) {
	if len(errs) > 0 {
		p.fail(d, w.String(), joinFieldErrors(errs))
		return
	}
	if n > p.maxPodsPerWorkload {
		p.fail(d, w.String(), fmt.Errorf("%d pods exceed the limit of %d pods per workload", n, p.maxPodsPerWorkload))
		return
	}
	if n > 0 && n > p.podBudget {
		p.fail(d, w.String(), fmt.Errorf("%d more pods exceed the limit on pods expanded from workloads (--max-pods, %d by default, sized for 2 GiB of memory); raise --max-pods to plan more", n, DefaultMaxPods))
		return
	}
	p.podBudget -= n
	if err := p.out.claim(keyOf(w.kind, w.meta), d.loc); err != nil {
		p.fail(d, "", err)
		return
	}
	p.out.workloads = append(p.out.workloads, keyOf(w.kind, w.meta))
	exp := &expansion{key: keyOf(w.kind, w.meta), uid: w.meta.GetUID(), replicas: int(n), template: tmpl.DeepCopy()}
	if ref := metav1.GetControllerOf(w.meta); ref != nil {
		exp.owner = ref
	}
	p.out.expansions = append(p.out.expansions, exp)
	gvk := map[string]string{"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}
	names := map[string]bool{}
	for i := int64(0); i < n; i++ {
		pod := &v1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace:         w.meta.GetNamespace(),
				Labels:            copyMap(tmpl.Labels),
				Annotations:       copyMap(tmpl.Annotations),
				CreationTimestamp: w.meta.GetCreationTimestamp(),
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: gvk[w.kind], Kind: w.kind, Name: w.meta.GetName(), UID: w.meta.GetUID(),
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec: *tmpl.Spec.DeepCopy(),
		}
		name(i, pod)
		// Hash suffixes can collide (27^5 values); re-derive until unique,
		// as the API server would retry a taken generated name.
		for salt := 0; names[pod.Name]; salt++ {
			pod.Name = generated(pod.Name[:len(pod.Name)-5], fmt.Sprintf("%s/%d", pod.Name, salt))
		}
		names[pod.Name] = true
		prepareMeta("Pod", pod, true, d.loc)
		if p.out.holds(keyOf("Pod", pod), keyOf(w.kind, w.meta)) {
			continue // the input holds this pod itself (a StatefulSet's ordinal)
		}
		// Template defaulting leaves pod-level defaults (requests from
		// limits) to pod creation; do them as pod creation would.
		legacyscheme.Scheme.Default(pod)
		// One bad pod means all are bad (they share the template); stop
		// instead of repeating the error n times.
		if !p.addPod(d, w.String(), pod) {
			return
		}
		exp.pods = append(exp.pods, pod.UID)
		if p.out.generatedBy == nil {
			p.out.generatedBy = map[objectKey]*expansion{}
		}
		p.out.generatedBy[keyOf("Pod", pod)] = exp
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
