package driver

import (
	"time"

	"google.golang.org/grpc"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
)

// The driver reports every device healthy. Kubelets with the
// ResourceHealthStatus feature open this stream for every driver and retry
// every few seconds against drivers without it, logging an error each time.
const (
	healthResend  = 30 * time.Second
	healthTimeout = 3 * healthResend // the kubelet marks a device Unknown after this
)

// NodeWatchResources streams the devices' health to the kubelet: all
// Healthy, repeated before the kubelet's timeout runs out.
func (d *Driver) NodeWatchResources(_ *drahealthv1alpha1.NodeWatchResourcesRequest, stream grpc.ServerStreamingServer[drahealthv1alpha1.NodeWatchResourcesResponse]) error {
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		resp := &drahealthv1alpha1.NodeWatchResourcesResponse{}
		now := time.Now().Unix()
		for _, name := range d.deviceNames {
			resp.Devices = append(resp.Devices, &drahealthv1alpha1.DeviceHealth{
				Device:                    &drahealthv1alpha1.DeviceIdentifier{PoolName: d.cfg.NodeName, DeviceName: name},
				Health:                    drahealthv1alpha1.HealthStatus_HEALTHY,
				LastUpdatedTime:           now,
				HealthCheckTimeoutSeconds: int64(healthTimeout / time.Second),
			})
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-t.C:
		}
	}
}
