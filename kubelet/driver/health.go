package driver

import (
	"context"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// The driver reports every device healthy. Kubelets with the
// ResourceHealthStatus feature watch every driver's health; the helper
// serves the kubelet's gRPC API versions (dra-health v1 and v1alpha1) from
// this one method.
const (
	healthResend  = 30 * time.Second
	healthTimeout = 3 * healthResend // the kubelet marks a device Unknown after this
)

// WatchHealthStatus implements kubeletplugin.DRAPlugin: a report of every
// device Healthy, repeated before the kubelet's timeout runs out, until
// ctx ends.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(d.deviceNames))}
		now := time.Now()
		for _, name := range d.deviceNames {
			report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
				PoolName: d.cfg.NodeName, DeviceName: name,
				Health:             kubeletplugin.HealthStatusHealthy,
				LastUpdated:        now,
				HealthCheckTimeout: healthTimeout,
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
