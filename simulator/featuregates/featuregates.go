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
		// GenericWorkload is served: simulator/scaleup plans a gang's pods
		// all or nothing, and DRAWorkloadResourceClaims: a PodGroup's
		// claims are made and reserved once for the group
		// (simulator/placement); TopologyAwareWorkloadScheduling: a gang
		// with a topology key is planned in one domain
		// (simulator/scaleup/topology.go). The rest of the Workload family
		// is not modelled.
		string(features.CompositePodGroup):        "composite PodGroups (gangs of gangs) are not planned by draxr, only single PodGroups",
		string(features.PodGroupPreemptionPolicy): "PodGroup preemption is not simulated by draxr",
		string(features.WorkloadWithJob): "Jobs that create their own Workload and PodGroup are expanded into pods by draxr without them, " +
			"so their gangs would be planned pod by pod",
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
