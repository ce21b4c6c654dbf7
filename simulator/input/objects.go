// Package input loads what the offline planner (`draxr simulate -f`) plans
// against: cluster objects from kubectl dumps or hand-written YAML/JSON,
// workloads expanded into the pods their controllers would create, and
// draxr NodeGroups.
//
// Objects are defaulted and validated the way the API server would on
// create (plus the status subresource's checks for the status a dump
// carries), so the planner never sees an object the real cluster would
// have refused. Errors name the file, the 1-based document and the field.
package input

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/nodegroup"
)

// Objects is everything loaded from the input files.
type Objects struct {
	Nodes                  []*v1.Node
	RunningPods            []*v1.Pod // pods with spec.nodeName
	PendingPods            []*v1.Pod // all others, incl. pods expanded from workloads
	ResourceSlices         []*resourceapi.ResourceSlice
	DeviceClasses          []*resourceapi.DeviceClass
	ResourceClaims         []*resourceapi.ResourceClaim
	ResourceClaimTemplates []*resourceapi.ResourceClaimTemplate
	// DeviceTaintRules taint the devices they select in live and template
	// slices alike (the snapshot applies them).
	DeviceTaintRules []*resourceapi.DeviceTaintRule
	NodeGroups       []*nodegroup.NodeGroup
	// DaemonSets are not expanded: each new node runs the pods of those
	// that match it (simulator/daemonsets).
	DaemonSets []*appsv1.DaemonSet
	// ClusterAPI holds the Cluster API objects as read (Machines,
	// MachineSets, MachineDeployments, MachinePools and
	// infrastructure.cluster.x-k8s.io objects such as machine templates):
	// the clusterapi cloud provider reads them as it reads them from the
	// API server, so a dump is planned as the autoscaler would plan it.
	ClusterAPI []*unstructured.Unstructured
	// ConfigMaps are read for the node groups that reference one
	// (draxr.dev/template-resource-slices-configmap).
	ConfigMaps []*v1.ConfigMap
	// ProvisioningRequests (CA's autoscaling.x-k8s.io/v1) and the
	// PodTemplates their podSets name: capacity asked before pods.
	ProvisioningRequests []*prv1.ProvisioningRequest
	PodTemplates         []*v1.PodTemplate
	// KueueConfigs are Kueue's ProvisioningRequestConfigs, and QueuedJobs
	// the suspended Jobs that wait in a Kueue queue (they have no pods
	// yet): the doctor checks what Kueue will ask of the autoscaler.
	KueueConfigs []*unstructured.Unstructured
	QueuedJobs   []*batchv1.Job
	// CapacityBuffers (CA's autoscaling.x-k8s.io/v1beta1) keep room for
	// pods that do not exist yet.
	CapacityBuffers []*capacitybuffer.CapacityBuffer
	// ResourceQuotas cap buffers' replicas.
	ResourceQuotas []*v1.ResourceQuota
	// PodGroups (scheduling.k8s.io/v1beta1) and Volcano's PodGroups (as
	// read) make gangs of the pods that name them.
	PodGroups        []*schedulingv1beta1.PodGroup
	VolcanoPodGroups []*unstructured.Unstructured
	// Skipped counts, per "apiVersion kind", objects of kinds the planner
	// does not read (Services, Secrets, CRDs it does not know...).
	Skipped map[string]int

	// workloads are the Deployments, ReplicaSets, StatefulSets and Jobs
	// that were expanded into PendingPods; kept so that Merge can report
	// a workload defined in two files.
	workloads []objectKey
	// expansions record each workload's generated pods (reconcile.go).
	expansions []*expansion
	// generatedBy finds the expansion of a generated pod by its key.
	generatedBy map[objectKey]*expansion
	// origin maps each object to where it was defined ("a.yaml: document
	// 2"), for duplicate reports. It is rebuilt (without origins) when the
	// exported slices were changed behind its back.
	origin map[objectKey]string
}

type objectKey struct{ kind, namespace, name string }

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + quoteShort(k.name)
	}
	return k.kind + " " + quoteShort(k.namespace) + "/" + quoteShort(k.name)
}

func keyOf(kind string, obj metav1.Object) objectKey {
	return objectKey{kind, obj.GetNamespace(), obj.GetName()}
}

func (o *Objects) count() int {
	return len(o.Nodes) + len(o.RunningPods) + len(o.PendingPods) + len(o.ResourceSlices) +
		len(o.DeviceClasses) + len(o.ResourceClaims) + len(o.ResourceClaimTemplates) + len(o.DeviceTaintRules) +
		len(o.NodeGroups) + len(o.DaemonSets) + len(o.workloads) + len(o.ClusterAPI) + len(o.ConfigMaps) +
		len(o.ProvisioningRequests) + len(o.PodTemplates) + len(o.KueueConfigs) + len(o.QueuedJobs) + len(o.CapacityBuffers) + len(o.ResourceQuotas) +
		len(o.PodGroups) + len(o.VolcanoPodGroups)
}

// SkippedSummary is one line on the objects of kinds the planner does not
// read, "" when there were none.
func (o *Objects) SkippedSummary() string {
	if len(o.Skipped) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(o.Skipped))
	n := 0
	for k, c := range o.Skipped {
		kinds = append(kinds, k)
		n += c
	}
	sort.Strings(kinds)
	return fmt.Sprintf("skipped %d objects of kinds draxr does not read: %s", n, strings.Join(kinds, ", "))
}

// index returns the origin map, rebuilding it when objects were appended
// to the exported slices directly (a duplicate is never appended, so a
// consistent index has exactly one entry per object).
func (o *Objects) index() map[objectKey]string {
	if o.origin != nil && len(o.origin) == o.count() {
		return o.origin
	}
	old := o.origin
	o.origin = make(map[objectKey]string, o.count())
	o.each(func(kind string, obj metav1.Object) { o.origin[keyOf(kind, obj)] = old[keyOf(kind, obj)] })
	for _, k := range o.workloads {
		o.origin[k] = old[k]
	}
	return o.origin
}

// each visits every object with its kind.
func (o *Objects) each(fn func(kind string, obj metav1.Object)) {
	visit(o.Nodes, "Node", fn)
	visit(o.RunningPods, "Pod", fn)
	visit(o.PendingPods, "Pod", fn)
	visit(o.ResourceSlices, "ResourceSlice", fn)
	visit(o.DeviceClasses, "DeviceClass", fn)
	visit(o.ResourceClaims, "ResourceClaim", fn)
	visit(o.ResourceClaimTemplates, "ResourceClaimTemplate", fn)
	visit(o.DeviceTaintRules, "DeviceTaintRule", fn)
	visit(o.NodeGroups, nodegroup.Kind, fn)
	visit(o.DaemonSets, "DaemonSet", fn)
	for _, u := range o.ClusterAPI {
		fn(u.GetKind(), u)
	}
	visit(o.ConfigMaps, "ConfigMap", fn)
	visit(o.ProvisioningRequests, "ProvisioningRequest", fn)
	visit(o.PodTemplates, "PodTemplate", fn)
	visit(o.KueueConfigs, "ProvisioningRequestConfig", fn)
	visit(o.QueuedJobs, "QueuedJob", fn)
	visit(o.CapacityBuffers, capacitybuffer.Kind, fn)
	visit(o.ResourceQuotas, "ResourceQuota", fn)
	visit(o.PodGroups, "PodGroup", fn)
	visit(o.VolcanoPodGroups, gang.KindVolcano, fn)
}

func visit[T metav1.Object](list []T, kind string, fn func(string, metav1.Object)) {
	for _, obj := range list {
		fn(kind, obj)
	}
}

// claim records key as defined at origin, or reports the earlier definition.
func (o *Objects) claim(key objectKey, origin string) error {
	idx := o.index()
	if first, ok := idx[key]; ok {
		if first == "" {
			return fmt.Errorf("duplicate %s", key)
		}
		return fmt.Errorf("duplicate %s (first defined at %s)", key, first)
	}
	idx[key] = origin
	return nil
}

// add appends obj to list unless an object of the same kind, namespace and
// name is already in o.
func add[T metav1.Object](o *Objects, list *[]T, kind string, obj T, origin string) error {
	if err := o.claim(keyOf(kind, obj), origin); err != nil {
		return err
	}
	*list = append(*list, obj)
	return nil
}

// Merge appends other into o. An object whose kind, namespace and name o
// already holds is not appended; every such duplicate is reported, naming
// where both copies were defined. Pods expanded from a duplicated workload
// are left out silently: the workload's report covers them.
func (o *Objects) Merge(other *Objects) error {
	if other == nil {
		return nil
	}
	from := other.index()
	var errs []error
	report := func(key objectKey, err error) {
		if src := from[key]; src != "" {
			err = fmt.Errorf("%s: %w", src, err)
		}
		errs = append(errs, err)
	}
	dupWorkloads := map[objectKey]bool{}
	for _, k := range other.workloads {
		if err := o.claim(k, from[k]); err != nil {
			dupWorkloads[k] = true
			report(k, err)
			continue
		}
		o.workloads = append(o.workloads, k)
	}
	for _, e := range other.expansions {
		if !dupWorkloads[e.key] {
			o.expansions = append(o.expansions, e)
		}
	}
	for k, e := range other.generatedBy {
		if !dupWorkloads[e.key] {
			if o.generatedBy == nil {
				o.generatedBy = map[objectKey]*expansion{}
			}
			o.generatedBy[k] = e
		}
	}
	mergeList(o, &o.Nodes, other.Nodes, "Node", from, report)
	mergePods := func(dst *[]*v1.Pod, src []*v1.Pod) {
		for _, pod := range src {
			if ref := metav1.GetControllerOf(pod); ref != nil &&
				dupWorkloads[objectKey{ref.Kind, pod.Namespace, ref.Name}] {
				continue
			}
			if err := add(o, dst, "Pod", pod, from[keyOf("Pod", pod)]); err != nil {
				report(keyOf("Pod", pod), err)
			}
		}
	}
	mergePods(&o.RunningPods, other.RunningPods)
	mergePods(&o.PendingPods, other.PendingPods)
	mergeList(o, &o.ResourceSlices, other.ResourceSlices, "ResourceSlice", from, report)
	mergeList(o, &o.DeviceClasses, other.DeviceClasses, "DeviceClass", from, report)
	mergeList(o, &o.ResourceClaims, other.ResourceClaims, "ResourceClaim", from, report)
	mergeList(o, &o.ResourceClaimTemplates, other.ResourceClaimTemplates, "ResourceClaimTemplate", from, report)
	mergeList(o, &o.DeviceTaintRules, other.DeviceTaintRules, "DeviceTaintRule", from, report)
	mergeList(o, &o.NodeGroups, other.NodeGroups, nodegroup.Kind, from, report)
	mergeList(o, &o.DaemonSets, other.DaemonSets, "DaemonSet", from, report)
	for _, u := range other.ClusterAPI {
		key := keyOf(u.GetKind(), u)
		if err := add(o, &o.ClusterAPI, u.GetKind(), u, from[key]); err != nil {
			report(key, err)
		}
	}
	mergeList(o, &o.ConfigMaps, other.ConfigMaps, "ConfigMap", from, report)
	mergeList(o, &o.ProvisioningRequests, other.ProvisioningRequests, "ProvisioningRequest", from, report)
	mergeList(o, &o.PodTemplates, other.PodTemplates, "PodTemplate", from, report)
	mergeList(o, &o.KueueConfigs, other.KueueConfigs, "ProvisioningRequestConfig", from, report)
	mergeList(o, &o.QueuedJobs, other.QueuedJobs, "QueuedJob", from, report)
	mergeList(o, &o.CapacityBuffers, other.CapacityBuffers, capacitybuffer.Kind, from, report)
	mergeList(o, &o.PodGroups, other.PodGroups, "PodGroup", from, report)
	mergeList(o, &o.VolcanoPodGroups, other.VolcanoPodGroups, gang.KindVolcano, from, report)
	mergeList(o, &o.ResourceQuotas, other.ResourceQuotas, "ResourceQuota", from, report)
	for k, n := range other.Skipped {
		if o.Skipped == nil {
			o.Skipped = map[string]int{}
		}
		o.Skipped[k] += n
	}
	return errors.Join(errs...)
}

func mergeList[T metav1.Object](o *Objects, dst *[]T, src []T, kind string,
	from map[objectKey]string, report func(objectKey, error)) {
	for _, obj := range src {
		key := keyOf(kind, obj)
		if err := add(o, dst, kind, obj, from[key]); err != nil {
			report(key, err)
		}
	}
}
