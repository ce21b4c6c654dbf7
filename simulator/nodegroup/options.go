package nodegroup

import (
	"fmt"
	"strconv"
	"time"
)

// AutoscalingOptionsPrefix starts the annotations by which a node group
// (a NodeGroup, or a Cluster API MachineDeployment, MachineSet or
// MachinePool) overrides the autoscaler's flags for itself, as CA's
// NodeGroup.GetOptions reads them.
const AutoscalingOptionsPrefix = "cluster.x-k8s.io/autoscaling-options-"

// Autoscaling option keys (CA's config.Default*Key names).
const (
	OptScaleDownUtilizationThreshold    = "scaledownutilizationthreshold"
	OptScaleDownGpuUtilizationThreshold = "scaledowngpuutilizationthreshold"
	OptScaleDownUnneededTime            = "scaledownunneededtime"
	OptScaleDownUnreadyTime             = "scaledownunreadytime"
	OptMaxNodeProvisionTime             = "maxnodeprovisiontime"
	OptMaxNodeStartupTime               = "maxnodestartuptime"
)

// Options are a group's overrides of the autoscaler's flags; nil means
// the flag's value applies.
type Options struct {
	ScaleDownUtilizationThreshold    *float64
	ScaleDownGpuUtilizationThreshold *float64
	ScaleDownUnneededTime            *time.Duration
	ScaleDownUnreadyTime             *time.Duration
	MaxNodeProvisionTime             *time.Duration
	MaxNodeStartupTime               *time.Duration
}

// OptionError names the annotation a bad option value came from.
type OptionError struct {
	Annotation string
	Err        error
}

func (e *OptionError) Error() string { return fmt.Sprintf("annotation %s: %v", e.Annotation, e.Err) }
func (e *OptionError) Unwrap() error { return e.Err }

// ParseOptions reads a group's autoscaling-options-* annotations.
func ParseOptions(annotations map[string]string) (Options, error) {
	var o Options
	float := func(key string, into **float64) error {
		v, ok := annotations[AutoscalingOptionsPrefix+key]
		if !ok {
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return &OptionError{AutoscalingOptionsPrefix + key, fmt.Errorf("%q is not a number within [0, 1]", v)}
		}
		*into = &f
		return nil
	}
	duration := func(key string, into **time.Duration) error {
		v, ok := annotations[AutoscalingOptionsPrefix+key]
		if !ok {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return &OptionError{AutoscalingOptionsPrefix + key, fmt.Errorf("%q is not a non-negative duration (e.g. 10m)", v)}
		}
		*into = &d
		return nil
	}
	for _, err := range []error{
		float(OptScaleDownUtilizationThreshold, &o.ScaleDownUtilizationThreshold),
		float(OptScaleDownGpuUtilizationThreshold, &o.ScaleDownGpuUtilizationThreshold),
		duration(OptScaleDownUnneededTime, &o.ScaleDownUnneededTime),
		duration(OptScaleDownUnreadyTime, &o.ScaleDownUnreadyTime),
		duration(OptMaxNodeProvisionTime, &o.MaxNodeProvisionTime),
		duration(OptMaxNodeStartupTime, &o.MaxNodeStartupTime),
	} {
		if err != nil {
			return Options{}, err
		}
	}
	return o, nil
}
