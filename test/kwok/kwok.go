// Package kwok runs the kwok controller (sigs.k8s.io/kwok, linked in
// process) against a test control plane: it takes up the nodes marked
// kwok.x-k8s.io/node: fake, makes them Ready and keeps them so
// (node-initialize and a heartbeat stage), runs the pods bound to them
// (pod-ready), finishes pods whose containers end (pod-complete) and
// removes deleted pods (pod-delete), so nothing home-made plays the
// kubelet in the fleet tests. The stages are kwok's own defaults, as
// kwokctl installs them.
//
// The not-ready taint the API server puts on a new node is lifted by the
// node lifecycle controller, as in a real cluster: start the control
// plane with Controllers() (controlplane.DefaultControllers plus
// node-lifecycle-controller).
package kwok

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	nodeheartbeatlease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwokclient "sigs.k8s.io/kwok/pkg/utils/client"

	"draxr.dev/draxr/cloudprovider/kwok"
	"draxr.dev/draxr/test/controlplane"
)

// Controllers are the control plane's controllers for kwok nodes:
// draxr's defaults and the node lifecycle controller, which lifts the
// not-ready taint once kwok reports a node Ready.
func Controllers() []string {
	return append(controlplane.DefaultControllers(), "node-lifecycle-controller")
}

// Options configure the controller.
type Options struct {
	// Kubeconfig reaches the API server (the control plane's admin one).
	Kubeconfig string
	// LeaseDuration, when set, makes node heartbeats Leases of that
	// duration (renewed at a quarter of it) and the Ready condition's
	// heartbeat rare, as kwokctl does; else the status is the heartbeat
	// (every 20 to 45 s).
	LeaseDuration time.Duration
	// Parallelism of the node and pod stages; kwok's default when 0.
	Parallelism uint
	// Log receives kwok's log (warnings and errors); discarded if nil.
	Log io.Writer
}

// Controller is a running kwok controller.
type Controller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Start starts the controller; it runs until Stop or ctx ends.
func Start(ctx context.Context, opts Options) (*Controller, error) {
	if opts.Kubeconfig == "" {
		return nil, errors.New("kwok: Options.Kubeconfig is required")
	}
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	ctx, cancel := context.WithCancel(ctx)
	ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(out, slog.LevelWarn))
	ctr, err := build(ctx, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := ctr.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("kwok: start controller: %w", err)
	}
	c := &Controller{cancel: cancel, done: make(chan struct{})}
	go func() {
		<-ctx.Done()
		close(c.done)
	}()
	return c, nil
}

// Stop stops the controller's loops (its informers end with the context).
func (c *Controller) Stop() {
	c.cancel()
	<-c.done
}

func build(ctx context.Context, opts Options) (*controllers.Controller, error) {
	stages, err := defaultStages(opts.LeaseDuration > 0)
	if err != nil {
		return nil, err
	}
	clients, err := kwokclient.NewClientset("", opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	restConfig, err := clients.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kwok: %s: %w", opts.Kubeconfig, err)
	}
	dynamicClient, err := clients.ToDynamicClient()
	if err != nil {
		return nil, err
	}
	restMapper, err := clients.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return nil, err
	}
	typed, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	typedKwok, err := versioned.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	id, err := controllers.Identity()
	if err != nil {
		return nil, err
	}
	defaults := kwokconfig.GetKwokConfiguration(ctx).Options
	parallelism := func(def uint) uint {
		if opts.Parallelism > 0 {
			return opts.Parallelism
		}
		return def
	}
	return controllers.NewController(controllers.Config{
		Clock:                             clock.RealClock{},
		DynamicClient:                     dynamicClient,
		RESTClient:                        restClient,
		RESTMapper:                        restMapper,
		ImpersonatingDynamicClient:        clients.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:          clients.ToImpersonatingTypedClient(),
		TypedClient:                       typed,
		TypedKwokClient:                   typedKwok,
		ManageNodesWithAnnotationSelector: kwok.FakeNodeAnnotation + "=" + kwok.FakeNodeValue,
		CIDR:                              defaults.CIDR,
		NodeIP:                            defaults.NodeIP,
		NodeName:                          defaults.NodeName,
		PodPlayStageParallelism:           parallelism(defaults.PodPlayStageParallelism),
		NodePlayStageParallelism:          parallelism(defaults.NodePlayStageParallelism),
		LocalStages:                       stages,
		NodeLeaseParallelism:              parallelism(defaults.NodeLeaseParallelism),
		NodeLeaseDurationSeconds:          uint(opts.LeaseDuration / time.Second),
		ID:                                id,
		PodsOnNodeSyncParallelism:         parallelism(defaults.PodsOnNodeSyncParallelism),
	})
}

// defaultStages are kwok's fast node and pod stages, as kwokctl sets a
// cluster up: node-initialize and a heartbeat; pod-ready, pod-complete
// and pod-delete.
func defaultStages(lease bool) (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	heartbeat := nodeheartbeat.DefaultNodeHeartbeat
	if lease {
		heartbeat = nodeheartbeatlease.DefaultNodeHeartbeatWithLease
	}
	out := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, raw := range []string{nodefast.DefaultNodeInit, heartbeat, podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete} {
		s, err := kwokconfig.UnmarshalWithType[*internalversion.Stage](raw)
		if err != nil {
			return nil, fmt.Errorf("kwok: default stage: %w", err)
		}
		out[s.Spec.ResourceRef] = append(out[s.Spec.ResourceRef], s)
	}
	return out, nil
}
