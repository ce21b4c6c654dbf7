// Package featuregates is --feature-gates as kube-scheduler takes it,
// shared by draxr simulate and draxr-autoscaler: the planner runs the
// scheduler's plugins, which read the process's feature gates.
package featuregates

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// AddFlag registers --feature-gates on fs; the given key=value pairs
// land in gates.
func AddFlag(fs *pflag.FlagSet, gates *map[string]bool, usage string) {
	if *gates == nil {
		*gates = map[string]bool{}
	}
	fs.Var(cliflag.NewMapStringBool(gates), "feature-gates", usage)
}

// Refused are the gates draxr refuses to turn on, with why: the
// scheduler would act on them in ways draxr's simulation does not
// (docs/dra-support.md).
func Refused() map[string]string {
	return map[string]string{
		// With DRANodeAllocatableResources (alpha, off by default) the
		// scheduler's PreBind writes status.nodeAllocatableResourceClaimStatuses,
		// which node accounting then reads; draxr's simulated bind does not.
		string(features.DRANodeAllocatableResources): "the scheduler's bind writes status.nodeAllocatableResourceClaimStatuses, " +
			"which draxr's simulated bind does not, so a plan would count node resources wrongly",
		// The Workload API's gang scheduling: the scheduler binds a PodGroup's
		// pods all or none; draxr plans pod by pod (and the upstream
		// preemption evaluator it builds has no workload listers).
		string(features.GenericWorkload): "the scheduler then binds a PodGroup's pods all or none (gangs), which draxr's planner does not model: " +
			"it would add nodes for part of a gang that never runs",
		string(features.DRAWorkloadResourceClaims): "claims reserved for a whole PodGroup need the Workload API (GenericWorkload), which draxr does not model",
		string(features.CompositePodGroup):         "composite PodGroups are part of the Workload API (GenericWorkload), which draxr does not model",
		string(features.TopologyAwareWorkloadScheduling): "topology-aware placement of PodGroups is part of the Workload API (GenericWorkload), " +
			"which draxr does not model",
		string(features.PodGroupPreemptionPolicy): "PodGroup preemption is part of the Workload API (GenericWorkload), which draxr does not model",
		string(features.WorkloadWithJob):          "Jobs with a Workload are part of the Workload API (GenericWorkload), which draxr does not model",
	}
}

// Apply sets the process's Kubernetes feature gates. Names are checked
// first: the gate remembers even a refused setting.
func Apply(gates map[string]bool) error {
	if len(gates) == 0 {
		return nil
	}
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	for name, value := range gates {
		spec, ok := known[featuregate.Feature(name)]
		if !ok {
			return fmt.Errorf("--feature-gates: unknown feature gate %q", name)
		}
		// Checked before anything is set: a refused SetFromMap may leave
		// the process's gates half changed.
		if spec.LockToDefault && value != spec.Default {
			return fmt.Errorf("--feature-gates: cannot set feature gate %s to %t, feature is locked to %t", name, value, spec.Default)
		}
	}
	// With DRANodeAllocatableResources (alpha, off by default) the
	// scheduler's PreBind writes status.nodeAllocatableResourceClaimStatuses,
	// which node accounting then reads; draxr's simulated bind does not,
	// so its plans would count node resources the scheduler counts as
	// taken. Refused before anything is set.
	refused := Refused()
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		if gates[name] {
			return fmt.Errorf("--feature-gates: %s=true is not modelled: %s; plan with the gate off", name, refused[name])
		}
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	return nil
}
