package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/test/soak/checker"
)

// workload drives the seeded churn: Deployments and Jobs asking for
// GPUs of every shape, and pods the autoscaler must never remove.
type workload struct {
	client kubernetes.Interface
	rng    *rand.Rand
	record func(what string)
	n      int

	deployments []string
	jobs        []string
	protected   []protectedPod
}

type protectedPod struct {
	kind, namespace, name string
	since                 time.Time
}

// Caps keep the churn within what the groups' max sizes hold, most of
// the time, so pending pods are the autoscaler's business.
const (
	maxDeployments = 5
	maxJobs        = 3
	maxProtected   = 3
	maxReplicas    = 4
)

func (w *workload) setup(ctx context.Context) error {
	if _, err := w.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	c := fx.Class(draClass, draDriver, draResource, time.Time{})
	c.UID, c.CreationTimestamp = "", metav1.Time{}
	if _, err := w.client.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Whole GPUs have no profile attribute: a selector reading it
	// unguarded fails every allocation with a CEL runtime error.
	mig := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: migClass}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(
			"device.driver == %q && device.attributes[%q].?profile.orValue(\"\") == %q", fx.NVIDIADriver, fx.NVIDIADriver, migProfile)}}}}}
	_, err := w.client.ResourceV1().DeviceClasses().Create(ctx, mig, metav1.CreateOptions{})
	return err
}

func (w *workload) shape() shape {
	n := int64(1 + w.rng.IntN(4))
	switch w.rng.IntN(4) {
	case 3:
		return shape{name: "mig", count: (n + 1) / 2, claim: true, mig: true}
	case 0:
		return shape{name: "plugin", count: n}
	case 1:
		return shape{name: "draext", count: n, dra: true}
	default:
		return shape{name: "claim", count: n, dra: true, claim: true}
	}
}

// podTemplate asks for the shape, with the soak label so only soak nodes
// take it, and no grace period (nothing runs the pods).
func (w *workload) podTemplate(ctx context.Context, name string, s shape, restart v1.RestartPolicy) (v1.PodTemplateSpec, error) {
	c := v1.Container{Name: "main", Image: "registry.example/app",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}
	// A grace period, so a drain takes a moment (the backend's kubelet
	// stand-in confirms terminations): faults can land mid-drain.
	spec := v1.PodSpec{NodeSelector: map[string]string{"soak": "true"}, TerminationGracePeriodSeconds: ptr.To[int64](3),
		RestartPolicy: restart}
	switch {
	case s.claim:
		class := draClass
		if s.mig {
			class = migClass
		}
		tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
				Devices: resourceapi.DeviceClaim{Requests: fx.DeviceRequests("gpus", class, s.count)}}}}
		if _, err := w.client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			return v1.PodTemplateSpec{}, err
		}
		spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(name)}}
		c.Resources.Claims = []v1.ResourceClaim{{Name: "gpus"}}
	case s.dra:
		c.Resources.Limits = v1.ResourceList{draResource: fx.Count(s.count)}
	default:
		c.Resources.Limits = v1.ResourceList{pluginResource: fx.Count(s.count)}
	}
	spec.Containers = []v1.Container{c}
	return v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name},
		Annotations: map[string]string{shapeAnnotation: s.String()}}, Spec: spec}, nil
}

// step takes one random action.
func (w *workload) step(ctx context.Context) error {
	w.n++
	switch r := w.rng.IntN(100); {
	case r < 22 && len(w.deployments) < maxDeployments:
		return w.createDeployment(ctx)
	case r < 50 && len(w.deployments) > 0:
		return w.scaleDeployment(ctx)
	case r < 58 && len(w.deployments) > 0:
		return w.deleteDeployment(ctx)
	case r < 72 && len(w.jobs) < maxJobs:
		return w.createJob(ctx)
	case r < 86 && len(w.protected) < maxProtected:
		return w.createProtected(ctx)
	case r < 100 && len(w.protected) > 0:
		return w.deleteProtected(ctx)
	}
	return nil
}

func (w *workload) createDeployment(ctx context.Context) error {
	name := fmt.Sprintf("deploy-%d", w.n)
	s := w.shape()
	tmpl, err := w.podTemplate(ctx, name, s, v1.RestartPolicyAlways)
	if err != nil {
		return err
	}
	replicas := int32(1 + w.rng.IntN(maxReplicas))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
	if _, err := w.client.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.deployments = append(w.deployments, name)
	w.record(fmt.Sprintf("create Deployment (%s, %d replicas)", s.name, replicas))
	return nil
}

func (w *workload) scaleDeployment(ctx context.Context) error {
	name := w.deployments[w.rng.IntN(len(w.deployments))]
	replicas := int32(w.rng.IntN(maxReplicas + 1))
	scale, err := w.client.AppsV1().Deployments(namespace).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	scale.Spec.Replicas = replicas
	if _, err := w.client.AppsV1().Deployments(namespace).UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if replicas == 0 {
		w.record("scale Deployment to 0")
	} else {
		w.record("scale Deployment")
	}
	return nil
}

func (w *workload) deleteDeployment(ctx context.Context) error {
	i := w.rng.IntN(len(w.deployments))
	name := w.deployments[i]
	err := w.client.AppsV1().Deployments(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil {
		return err
	}
	_ = w.client.ResourceV1().ResourceClaimTemplates(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	w.deployments = append(w.deployments[:i], w.deployments[i+1:]...)
	w.record("delete Deployment")
	return nil
}

func (w *workload) createJob(ctx context.Context) error {
	name := fmt.Sprintf("job-%d", w.n)
	s := w.shape()
	tmpl, err := w.podTemplate(ctx, name, s, v1.RestartPolicyNever)
	if err != nil {
		return err
	}
	tmpl.Annotations[runtimeAnnotation] = strconv.Itoa(10 + w.rng.IntN(40))
	tmpl.Labels = nil
	parallel := int32(1 + w.rng.IntN(3))
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(parallel), Completions: ptr.To(parallel), Template: tmpl}}
	if _, err := w.client.BatchV1().Jobs(namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.jobs = append(w.jobs, name)
	w.record(fmt.Sprintf("create Job (%s, %d pods)", s.name, parallel))
	return nil
}

// reapJobs forgets Jobs that finished and deletes them, with their
// templates (the ttl controller does not run here).
func (w *workload) reapJobs(ctx context.Context) {
	kept := w.jobs[:0]
	for _, name := range w.jobs {
		j, err := w.client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || j.Status.Succeeded < ptr.Deref(j.Spec.Completions, 1) {
			kept = append(kept, name)
			continue
		}
		_ = w.client.BatchV1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		_ = w.client.ResourceV1().ResourceClaimTemplates(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		w.record("Job completed and deleted")
	}
	w.jobs = kept
}

// The kinds of pod CA's rules keep on their node.
const (
	protectBare       = "no controller"
	protectLocal      = "local storage"
	protectNoEvict    = "safe-to-evict=false"
	protectPDB        = "PDB allowing no disruption"
	protectKubeSystem = "kube-system pod"
)

func (w *workload) createProtected(ctx context.Context) error {
	kinds := []string{protectBare, protectLocal, protectNoEvict, protectPDB, protectKubeSystem}
	kind := kinds[w.rng.IntN(len(kinds))]
	name := fmt.Sprintf("keep-%d", w.n)
	ns := namespace
	if kind == protectKubeSystem {
		ns = metav1.NamespaceSystem
	}
	labels := map[string]string{"app": name}
	tmpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels,
		Annotations: map[string]string{shapeAnnotation: "cpu-0"}},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"soak": "true"}, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}}}
	switch kind {
	case protectLocal:
		tmpl.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	case protectNoEvict:
		tmpl.Annotations[checker.SafeToEvictAnnotation] = "false"
	case protectPDB:
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
		if _, err := w.client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if kind == protectBare {
		p := &v1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		p.Name, p.Namespace = name, ns
		if _, err := w.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
		if _, err := w.client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	w.protected = append(w.protected, protectedPod{kind: kind, namespace: ns, name: name, since: time.Now()})
	w.record("create protected pod: " + kind)
	return nil
}

func (w *workload) deleteProtected(ctx context.Context) error {
	i := w.rng.IntN(len(w.protected))
	p := w.protected[i]
	if time.Since(p.since) < 20*time.Second {
		return nil
	}
	var err error
	if p.kind == protectBare {
		err = w.client.CoreV1().Pods(p.namespace).Delete(ctx, p.name, metav1.DeleteOptions{})
	} else {
		err = w.client.AppsV1().ReplicaSets(p.namespace).Delete(ctx, p.name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}
	if err != nil {
		return err
	}
	if p.kind == protectPDB {
		_ = w.client.PolicyV1().PodDisruptionBudgets(p.namespace).Delete(ctx, p.name, metav1.DeleteOptions{})
	}
	w.protected = append(w.protected[:i], w.protected[i+1:]...)
	w.record("delete protected pod: " + p.kind)
	return nil
}
