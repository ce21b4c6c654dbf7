package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"draxr.dev/draxr/autoscaler/backoff"
	"draxr.dev/draxr/autoscaler/clusterstate"
	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/health"
)

// failureOptions are the flags of the failure model, health check and
// leader election life cycle (issue 12, parts 3 and 5), CA's names and
// defaults. They are kept apart from options so that other flag blocks
// can change without touching these.
type failureOptions struct {
	maxNodeProvisionTime      time.Duration
	maxNodeStartupTime        time.Duration
	initialBackoff            time.Duration
	maxBackoff                time.Duration
	backoffResetTimeout       time.Duration
	okTotalUnreadyCount       int
	maxTotalUnreadyPercentage float64
	maxInactivity             time.Duration
	maxFailingTime            time.Duration
	maxStartupTime            time.Duration
	leaderElectRenewDeadline  time.Duration
	leaderElectRetryPeriod    time.Duration
}

func (o *failureOptions) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.maxNodeProvisionTime, "max-node-provision-time", clusterstate.DefaultMaxNodeProvisionTime,
		"the maximum time a new node may take to register and turn Ready; after it the node is given up and its group backed off")
	fs.DurationVar(&o.maxNodeStartupTime, "max-node-startup-time", clusterstate.DefaultMaxNodeStartupTime,
		"the maximum time a registered node may take to turn Ready")
	fs.DurationVar(&o.initialBackoff, "initial-node-group-backoff-duration", backoff.DefaultInitial,
		"how long a node group whose scale-up failed is first left out of scale-up")
	fs.DurationVar(&o.maxBackoff, "max-node-group-backoff-duration", backoff.DefaultMax,
		"the longest a node group is left out of scale-up (the backoff doubles up to this)")
	fs.DurationVar(&o.backoffResetTimeout, "node-group-backoff-reset-timeout", backoff.DefaultResetTimeout,
		"time after the last failure after which a node group's backoff starts again from the initial duration")
	fs.IntVar(&o.okTotalUnreadyCount, "ok-total-unready-count", clusterstate.DefaultOkTotalUnreadyCount,
		"number of unready nodes allowed regardless of --max-total-unready-percentage")
	fs.Float64Var(&o.maxTotalUnreadyPercentage, "max-total-unready-percentage", clusterstate.DefaultMaxTotalUnreadyPercentage,
		"share of unready nodes (percent) beyond which the cluster is unhealthy and scale-down pauses")
	fs.DurationVar(&o.maxInactivity, "max-inactivity", health.DefaultMaxInactivity,
		"/health-check fails when no loop started for this long")
	fs.DurationVar(&o.maxFailingTime, "max-failing-time", health.DefaultMaxFailingTime,
		"/health-check fails when no loop succeeded for this long")
	fs.DurationVar(&o.maxStartupTime, "max-startup-time", health.DefaultMaxStartupTime,
		"the limit of both health-check rules until the first successful loop")
	fs.DurationVar(&o.leaderElectRenewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"how long the leader keeps retrying to renew its lease before it gives up leading; less than --leader-elect-lease-duration")
	fs.DurationVar(&o.leaderElectRetryPeriod, "leader-elect-retry-period", 2*time.Second,
		"how long candidates wait between tries to acquire or renew the lease; less than --leader-elect-renew-deadline")
}

// validate checks the block; leaseDuration is --leader-elect-lease-duration.
func (o *failureOptions) validate(leaseDuration time.Duration) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--max-node-provision-time", o.maxNodeProvisionTime}, {"--max-node-startup-time", o.maxNodeStartupTime},
		{"--initial-node-group-backoff-duration", o.initialBackoff}, {"--max-node-group-backoff-duration", o.maxBackoff},
		{"--node-group-backoff-reset-timeout", o.backoffResetTimeout}, {"--max-inactivity", o.maxInactivity},
		{"--max-failing-time", o.maxFailingTime}, {"--max-startup-time", o.maxStartupTime},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, got %s", d.flag, d.v)
		}
	}
	switch {
	case o.maxBackoff < o.initialBackoff:
		return fmt.Errorf("--max-node-group-backoff-duration (%s) must not be less than --initial-node-group-backoff-duration (%s)", o.maxBackoff, o.initialBackoff)
	case o.okTotalUnreadyCount < 0:
		return fmt.Errorf("--ok-total-unready-count must be >= 0, got %d", o.okTotalUnreadyCount)
	case o.maxTotalUnreadyPercentage < 0 || o.maxTotalUnreadyPercentage > 100:
		return fmt.Errorf("--max-total-unready-percentage must be within [0, 100], got %g", o.maxTotalUnreadyPercentage)
	case o.leaderElectRetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %s", o.leaderElectRetryPeriod)
	case o.leaderElectRenewDeadline <= o.leaderElectRetryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than --leader-elect-retry-period (%s)", o.leaderElectRenewDeadline, o.leaderElectRetryPeriod)
	case leaseDuration <= o.leaderElectRenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", leaseDuration, o.leaderElectRenewDeadline)
	}
	return nil
}

func (o *failureOptions) clusterState() *core.ClusterStateConfig {
	return &core.ClusterStateConfig{
		MaxNodeProvisionTime: o.maxNodeProvisionTime, MaxNodeStartupTime: o.maxNodeStartupTime,
		OkTotalUnreadyCount: o.okTotalUnreadyCount, MaxTotalUnreadyPercentage: o.maxTotalUnreadyPercentage,
		InitialBackoff: o.initialBackoff, MaxBackoff: o.maxBackoff, BackoffResetTimeout: o.backoffResetTimeout,
	}
}
