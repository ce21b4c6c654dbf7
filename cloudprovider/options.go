package cloudprovider

import (
	"time"

	"draxr.dev/draxr/simulator/nodegroup"
)

// WithOverrides returns d with each option o sets replaced: a group's
// cluster.x-k8s.io/autoscaling-options-* annotations over the flags.
func (d NodeGroupOptions) WithOverrides(o nodegroup.Options) NodeGroupOptions {
	set := func(to *float64, from *float64) {
		if from != nil {
			*to = *from
		}
	}
	setDuration := func(to *time.Duration, from *time.Duration) {
		if from != nil {
			*to = *from
		}
	}
	set(&d.ScaleDownUtilizationThreshold, o.ScaleDownUtilizationThreshold)
	set(&d.ScaleDownGpuUtilizationThreshold, o.ScaleDownGpuUtilizationThreshold)
	setDuration(&d.ScaleDownUnneededTime, o.ScaleDownUnneededTime)
	setDuration(&d.ScaleDownUnreadyTime, o.ScaleDownUnreadyTime)
	setDuration(&d.MaxNodeProvisionTime, o.MaxNodeProvisionTime)
	setDuration(&d.MaxNodeStartupTime, o.MaxNodeStartupTime)
	return d
}
