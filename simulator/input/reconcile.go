package input

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expansion is what one workload was expanded into, so that pods its
// controller already made are not planned a second time.
type expansion struct {
	key      objectKey
	uid      types.UID
	owner    *metav1.OwnerReference // the workload's controller, e.g. a ReplicaSet's Deployment
	replicas int
	pods     []types.UID // generated pods, in expansion order
	// template is the workload's pod template.
	template *v1.PodTemplateSpec
}

// Workload returns a Deployment's, ReplicaSet's, StatefulSet's or Job's
// pod template and the pods it runs at once (replicas, or a Job's
// parallelism), as read; ok is false when the input has no such workload.
func (o *Objects) Workload(kind, namespace, name string) (tmpl *v1.PodTemplateSpec, replicas int32, ok bool) {
	key := objectKey{kind, namespace, name}
	for _, e := range o.expansions {
		if e.key == key && e.template != nil {
			return e.template, int32(e.replicas), true
		}
	}
	return nil, 0, false
}

// reconcileWorkloads keeps, of each workload's generated pods, only those
// its controller has not made yet, as a controller would: a dump holds a
// Deployment, its ReplicaSets and their pods, and only the missing ones
// are pending. A Deployment whose ReplicaSet is in the input is expanded
// by the ReplicaSet alone. Running it twice changes nothing more.
func (o *Objects) reconcileWorkloads() {
	if len(o.expansions) == 0 {
		return
	}
	generated := map[types.UID]bool{}
	for _, e := range o.expansions {
		for _, uid := range e.pods {
			generated[uid] = true
		}
	}
	// Pods the input holds itself, by their controller.
	made := map[types.UID]int{}
	madeByName := map[objectKey]int{}
	byTemplateHash := map[objectKey]int{} // ReplicaSet pods, keyed by the Deployment's name
	for _, list := range [][]*v1.Pod{o.RunningPods, o.PendingPods} {
		for _, pod := range list {
			ref := metav1.GetControllerOfNoCopy(pod)
			if generated[pod.UID] || ref == nil {
				continue
			}
			made[ref.UID]++
			madeByName[objectKey{ref.Kind, pod.Namespace, ref.Name}]++
			if hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ref.Kind == "ReplicaSet" && hash != "" {
				if deploy, ok := strings.CutSuffix(ref.Name, "-"+hash); ok {
					byTemplateHash[objectKey{"Deployment", pod.Namespace, deploy}]++
				}
			}
		}
	}
	// Deployments whose ReplicaSets are in the input.
	hasReplicaSet := map[objectKey]bool{}
	for _, e := range o.expansions {
		if e.key.kind == "ReplicaSet" && e.owner != nil && e.owner.Kind == "Deployment" {
			hasReplicaSet[objectKey{"Deployment", e.key.namespace, e.owner.Name}] = true
		}
	}
	keep := map[types.UID]bool{}
	for _, e := range o.expansions {
		existing := madeByName[e.key]
		if n := made[e.uid]; e.uid != "" && n > existing {
			existing = n
		}
		if e.key.kind == "Deployment" {
			if hasReplicaSet[e.key] {
				continue
			}
			existing = max(existing, byTemplateHash[e.key])
		}
		want := max(0, e.replicas-existing)
		for _, uid := range e.pods {
			if want == 0 {
				break
			}
			keep[uid] = true
			want--
		}
	}
	pending := o.PendingPods[:0]
	for _, pod := range o.PendingPods {
		if !generated[pod.UID] || keep[pod.UID] {
			pending = append(pending, pod)
		}
	}
	clear(o.PendingPods[len(pending):])
	o.PendingPods = pending
	for _, e := range o.expansions {
		kept := e.pods[:0]
		for _, uid := range e.pods {
			if keep[uid] {
				kept = append(kept, uid)
			}
		}
		e.pods = kept
	}
}

// dropGenerated removes the generated pending pod that real, a pod of the
// input controlled by the same workload, stands for.
func (o *Objects) dropGenerated(real *v1.Pod) {
	key := keyOf("Pod", real)
	e := o.generatedBy[key]
	if e == nil || !controlledBy(real, e.key) {
		return
	}
	delete(o.generatedBy, key)
	idx := o.index()
	for j, pod := range o.PendingPods {
		if keyOf("Pod", pod) == key {
			delete(idx, key)
			o.PendingPods = append(o.PendingPods[:j], o.PendingPods[j+1:]...)
			e.pods = slices.DeleteFunc(e.pods, func(uid types.UID) bool { return uid == pod.UID })
			return
		}
	}
}

// controlledBy reports whether the pod's controller is the workload.
func controlledBy(pod *v1.Pod, workload objectKey) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	return ref != nil && ref.Kind == workload.kind && ref.Name == workload.name && pod.Namespace == workload.namespace
}

// holds reports whether the input already holds the pod named by key,
// controlled by the workload.
func (o *Objects) holds(key objectKey, workload objectKey) bool {
	if _, taken := o.index()[key]; !taken {
		return false
	}
	for _, list := range [][]*v1.Pod{o.RunningPods, o.PendingPods} {
		for _, pod := range list {
			if keyOf("Pod", pod) == key {
				return controlledBy(pod, workload)
			}
		}
	}
	return false
}

// expandedPods counts the pods workloads were expanded to.
func (o *Objects) expandedPods() int {
	n := 0
	for _, e := range o.expansions {
		n += e.replicas
	}
	return n
}
