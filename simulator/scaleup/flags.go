package scaleup

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

// DefaultExpendablePodsPriorityCutoff is CA's --expendable-pods-priority-cutoff.
const DefaultExpendablePodsPriorityCutoff = -10

// Flags are the Cluster Autoscaler's flags on which pending pods a plan
// is for, with CA's names, meanings and defaults. draxr simulate and
// draxr-autoscaler both register them through AddFlags.
type Flags struct {
	ExpendablePodsPriorityCutoff int
	BypassedSchedulerNames       []string
}

// AddFlags registers the flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&f.ExpendablePodsPriorityCutoff, "expendable-pods-priority-cutoff", DefaultExpendablePodsPriorityCutoff,
		"pods whose priority is below this are expendable: they never trigger a scale-up and do not keep a node from being removed (pods without a priority are never expendable)")
	fs.StringSliceVar(&f.BypassedSchedulerNames, "bypassed-scheduler-names", nil,
		"comma-separated scheduler names whose pending pods are planned for even though no profile of the scheduler configuration serves them")
}

// Apply sets the planner's fields from the flags.
func (f *Flags) Apply(p *Planner) {
	cutoff := int32(f.ExpendablePodsPriorityCutoff)
	p.ExpendablePodsPriorityCutoff = &cutoff
	p.BypassedSchedulerNames = slices.Clone(f.BypassedSchedulerNames)
}

// IsExpendable reports a pod whose priority is below cutoff (nil: no
// pod is expendable), as CA decides it: a pod without a priority is not.
func IsExpendable(pod *v1.Pod, cutoff *int32) bool {
	return cutoff != nil && pod.Spec.Priority != nil && *pod.Spec.Priority < *cutoff
}

func expendableReason(pod *v1.Pod, cutoff int32) string {
	return fmt.Sprintf("priority %d is below --expendable-pods-priority-cutoff %d: expendable pods never trigger a scale-up",
		*pod.Spec.Priority, cutoff)
}
