package view

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	prlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"

	"draxr.dev/draxr/simulator/input"
)

// View is every kind of the cluster draxr reads, as listers: the
// planner's (draxr simulate), the autoscaler loop's, its providers' and
// its batch steps'. Every reader takes its listers from one View, built
// from informers (autoscaler/liveview: the loop, --kubeconfig, --watch)
// or from objects read from files (FromObjects),
// so a dump and a live cluster are read by the same code. A nil lister is
// a kind not read (its API not served, or its step off).
type View struct {
	Nodes     corelisters.NodeLister
	Pods      corelisters.PodLister
	Slices    resourcelisters.ResourceSliceLister
	Classes   resourcelisters.DeviceClassLister
	Claims    resourcelisters.ResourceClaimLister
	Templates resourcelisters.ResourceClaimTemplateLister
	// TaintRules are the DeviceTaintRules (GA in 1.37): the devices they
	// taint are what the scheduler's allocator skips.
	TaintRules resourcelisters.DeviceTaintRuleLister
	// DaemonSets run their pods on every new node they match: a live plan
	// counts that overhead as a dump plan does.
	DaemonSets appslisters.DaemonSetLister
	// PDBs limit what scale-down may evict (a dump holds none).
	PDBs policylisters.PodDisruptionBudgetLister

	// PodGroups make gangs (GenericWorkload): set by
	// liveview.WithPodGroups where the API server serves them.
	PodGroups schedulinglisters.PodGroupLister
	// VolcanoPodGroups are Volcano's PodGroups, read unstructured (set
	// where Volcano's scheduler is bypassed and its API served).
	VolcanoPodGroups cache.GenericLister

	// The batch kinds (liveview.WithProvisioningRequests and
	// WithCapacityBuffers): CA's ProvisioningRequests, CapacityBuffers (unstructured), the
	// PodTemplates both name, the workloads a buffer's scalableRef names
	// and the ResourceQuotas that cap buffers.
	ProvisioningRequests prlisters.ProvisioningRequestLister
	CapacityBuffers      cache.GenericLister
	PodTemplates         corelisters.PodTemplateLister
	Deployments          appslisters.DeploymentLister
	ReplicaSets          appslisters.ReplicaSetLister
	StatefulSets         appslisters.StatefulSetLister
	Jobs                 batchlisters.JobLister
	ResourceQuotas       corelisters.ResourceQuotaLister
}

// VolcanoPodGroupsResource is the resource of Volcano's PodGroups.
func VolcanoPodGroupsResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
}

// Objects builds from the caches what input.LoadPaths builds from a dump of
// the same cluster: bound, unfinished pods are running, unbound ones
// pending (pods being bound run where the scheduler is binding them, as
// in the autoscaler's loop); finished pods are left out. Terminating pods are kept, as in a
// dump: a bound one still holds its node's resources in the scheduler's
// cache until it is gone. Lists are sorted by namespace and name so that
// the plan does not depend on cache order.
func (v View) Objects() (*input.Objects, error) {
	all := labels.Everything()
	objs := &input.Objects{}
	var err error
	if objs.Nodes, err = v.Nodes.List(all); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	pods, err := v.Pods.List(all)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	listed := make(map[string]bool, len(objs.Nodes))
	for _, n := range objs.Nodes {
		listed[n.Name] = true
	}
	for _, p := range pods {
		// Pods being bound are placed on their nodes below, once the
		// claims are read (PlaceBindingPods).
		switch input.SimulateFiling(input.ClassifyPod(p, nil)) {
		case input.Dropped:
		case input.OnItsNode:
			// A pod left on a node that is gone runs nowhere (PodGC
			// deletes it), as the loop's cluster state reads it.
			if listed[p.Spec.NodeName] {
				objs.RunningPods = append(objs.RunningPods, p)
			}
		default:
			objs.PendingPods = append(objs.PendingPods, p)
		}
	}
	if objs.ResourceSlices, err = v.Slices.List(all); err != nil {
		return nil, fmt.Errorf("list resourceslices: %w", err)
	}
	if objs.DeviceClasses, err = v.Classes.List(all); err != nil {
		return nil, fmt.Errorf("list deviceclasses: %w", err)
	}
	if objs.ResourceClaims, err = v.Claims.List(all); err != nil {
		return nil, fmt.Errorf("list resourceclaims: %w", err)
	}
	if objs.ResourceClaimTemplates, err = v.Templates.List(all); err != nil {
		return nil, fmt.Errorf("list resourceclaimtemplates: %w", err)
	}
	if objs.DeviceTaintRules, err = v.TaintRules.List(all); err != nil {
		return nil, fmt.Errorf("list devicetaintrules: %w", err)
	}
	if v.DaemonSets != nil {
		if objs.DaemonSets, err = v.DaemonSets.List(all); err != nil {
			return nil, fmt.Errorf("list daemonsets: %w", err)
		}
	}
	if err := v.AddGangs(objs); err != nil {
		return nil, err
	}
	if err := v.addBatch(objs); err != nil {
		return nil, err
	}
	sortByKey(objs.Nodes)
	sortByKey(objs.DaemonSets)
	sortByKey(objs.RunningPods)
	sortByKey(objs.PendingPods)
	sortByKey(objs.ResourceSlices)
	sortByKey(objs.DeviceClasses)
	sortByKey(objs.ResourceClaims)
	sortByKey(objs.ResourceClaimTemplates)
	sortByKey(objs.DeviceTaintRules)
	objs.PlaceBindingPods()
	return objs, nil
}

// AddGangs adds the PodGroups and Volcano's PodGroups the listers hold,
// sorted.
func (v View) AddGangs(objs *input.Objects) error {
	all := labels.Everything()
	if v.PodGroups != nil {
		groups, err := v.PodGroups.List(all)
		if err != nil {
			return fmt.Errorf("list podgroups: %w", err)
		}
		objs.PodGroups = groups
		sortByKey(objs.PodGroups)
	}
	if v.VolcanoPodGroups != nil {
		groups, err := v.VolcanoPodGroups.List(all)
		if err != nil {
			return fmt.Errorf("list %s: %w", VolcanoPodGroupsResource().GroupResource(), err)
		}
		objs.VolcanoPodGroups = nil
		for _, g := range groups {
			if u, ok := g.(*unstructured.Unstructured); ok {
				objs.VolcanoPodGroups = append(objs.VolcanoPodGroups, u)
			}
		}
		sortByKey(objs.VolcanoPodGroups)
	}
	return nil
}

type namespacedName interface {
	GetNamespace() string
	GetName() string
}

func sortByKey[T namespacedName](list []T) {
	sort.Slice(list, func(i, j int) bool {
		if a, b := list[i].GetNamespace(), list[j].GetNamespace(); a != b {
			return a < b
		}
		return list[i].GetName() < list[j].GetName()
	})
}
