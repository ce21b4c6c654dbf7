// Command draxr-scheduler is kube-scheduler v1.37 with DRA-backed extended
// resources resolved by draxr's DeviceClass index (see scheduler/plugins).
// Run it with scheduler/deploy/scheduler-config.yaml, which swaps the
// upstream DynamicResources, NodeResourcesFit and BalancedAllocation
// plugins for their wrapped versions.
package main

import (
	"fmt"
	"os"
	"slices"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"draxr.dev/draxr/scheduler/kubeversion"
	"draxr.dev/draxr/scheduler/plugins"
)

func main() {
	// kube-scheduler's own --version prints the Kubernetes version
	// stamped at link time; say which draxr and which Kubernetes instead.
	if slices.Contains(os.Args[1:], "--version") || slices.Contains(os.Args[1:], "--version=true") {
		fmt.Println("draxr-scheduler", kubeversion.Version())
		return
	}
	command := app.NewSchedulerCommand(plugins.Options()...)
	command.Use = "draxr-scheduler"
	os.Exit(cli.Run(command))
}
