package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/autoscaler/provisioning"
)

// provReqOptions are CA's ProvisioningRequest flags, with CA's names and
// defaults.
type provReqOptions struct {
	enableProvisioningRequests bool
	provReqInitialBackoff      time.Duration
	provReqMaxBackoff          time.Duration
	provReqBackoffCacheSize    int
	checkCapacityBatch         bool
	checkCapacityMaxBatchSize  int
	checkCapacityBatchTimebox  time.Duration
	checkCapacityInstance      string

	// CapacityBuffers, CA's flags.
	bufferController bool
	bufferInjection  bool
	bufferDryRun     bool
}

func (o *provReqOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.enableProvisioningRequests, "enable-provisioning-requests", false,
		"serve ProvisioningRequests (autoscaling.x-k8s.io/v1) of the classes check-capacity.autoscaling.x-k8s.io and "+
			"best-effort-atomic-scale-up.autoscaling.x-k8s.io; their pods take DRA devices as real pods do")
	fs.DurationVar(&o.provReqInitialBackoff, "provisioning-request-initial-backoff-time", provisioning.DefaultInitialBackoff,
		"how long a ProvisioningRequest not provisioned waits before it is tried again; doubles per try")
	fs.DurationVar(&o.provReqMaxBackoff, "provisioning-request-max-backoff-time", provisioning.DefaultMaxBackoff,
		"the longest a ProvisioningRequest waits between tries")
	fs.IntVar(&o.provReqBackoffCacheSize, "provisioning-request-max-backoff-cache-size", provisioning.DefaultBackoffCacheSize,
		"how many ProvisioningRequests' backoffs are remembered (the oldest are forgotten)")
	fs.BoolVar(&o.checkCapacityBatch, "check-capacity-batch-processing", false,
		"decide several check-capacity ProvisioningRequests a loop (up to --check-capacity-provisioning-request-max-batch-size)")
	fs.IntVar(&o.checkCapacityMaxBatchSize, "check-capacity-provisioning-request-max-batch-size", provisioning.DefaultMaxBatchSize,
		"with --check-capacity-batch-processing, the most check-capacity ProvisioningRequests decided a loop")
	fs.DurationVar(&o.checkCapacityBatchTimebox, "check-capacity-provisioning-request-batch-timebox", provisioning.DefaultBatchTimebox,
		"with --check-capacity-batch-processing, how long a loop may spend on a batch (the first request is always decided)")
	fs.BoolVar(&o.bufferController, "capacity-buffer-controller-enabled", false,
		"run the CapacityBuffer controller: set each buffer's replicas (DRA-backed extended resource limits counted in devices) and readiness")
	fs.BoolVar(&o.bufferInjection, "capacity-buffer-pod-injection-enabled", false,
		"keep room for ready CapacityBuffers: their pods take free room or drive a scale-up, and keep their nodes from scale-down")
	fs.BoolVar(&o.bufferDryRun, "capacity-buffer-pod-dry-run-enabled", true,
		"CA creates a buffer's pod in server dry run to apply webhooks; draxr applies the API server's defaults itself, so this changes nothing")
	fs.StringVar(&o.checkCapacityInstance, "check-capacity-processor-instance", "",
		"serve only check-capacity ProvisioningRequests whose parameters.processorInstance is this name, and no atomic ones "+
			"(for two autoscalers side by side); empty serves those that name no instance")
}

func (o *provReqOptions) validate() error {
	switch {
	case o.provReqInitialBackoff <= 0:
		return fmt.Errorf("--provisioning-request-initial-backoff-time must be positive, got %s", o.provReqInitialBackoff)
	case o.provReqMaxBackoff < o.provReqInitialBackoff:
		return fmt.Errorf("--provisioning-request-max-backoff-time (%s) must be at least --provisioning-request-initial-backoff-time (%s)",
			o.provReqMaxBackoff, o.provReqInitialBackoff)
	case o.provReqBackoffCacheSize <= 0:
		return fmt.Errorf("--provisioning-request-max-backoff-cache-size must be positive, got %d", o.provReqBackoffCacheSize)
	case o.checkCapacityMaxBatchSize <= 0:
		return fmt.Errorf("--check-capacity-provisioning-request-max-batch-size must be positive, got %d", o.checkCapacityMaxBatchSize)
	case o.checkCapacityBatchTimebox <= 0:
		return fmt.Errorf("--check-capacity-provisioning-request-batch-timebox must be positive, got %s", o.checkCapacityBatchTimebox)
	}
	return nil
}

// processorConfig is the processor's configuration from the flags; the
// listers and client are added at wiring.
func (o *provReqOptions) processorConfig() provisioning.Config {
	return provisioning.Config{
		InitialBackoff: o.provReqInitialBackoff, MaxBackoff: o.provReqMaxBackoff, BackoffCacheSize: o.provReqBackoffCacheSize,
		BatchProcessing: o.checkCapacityBatch, MaxBatchSize: o.checkCapacityMaxBatchSize, BatchTimebox: o.checkCapacityBatchTimebox,
		ProcessorInstance: o.checkCapacityInstance,
	}
}
