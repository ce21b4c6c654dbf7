package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	prv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	prclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	prinformers "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/informers/externalversions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"draxr.dev/draxr/autoscaler/buffers"
	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/autoscaler/health"
	"draxr.dev/draxr/autoscaler/liveview"
	"draxr.dev/draxr/autoscaler/looptrigger"
	"draxr.dev/draxr/autoscaler/metrics"
	"draxr.dev/draxr/autoscaler/provisioning"
	"draxr.dev/draxr/cloudprovider"
	"draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/cloudprovider/externalgrpc"
	"draxr.dev/draxr/cloudprovider/externalgrpc/protos"
	"draxr.dev/draxr/cloudprovider/kwok"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/scheduler/kubeversion"
	"draxr.dev/draxr/simulator/capacitybuffer"
	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/featuregates"
	"draxr.dev/draxr/simulator/gang"
	"draxr.dev/draxr/simulator/input"
	"draxr.dev/draxr/simulator/placement"
	"draxr.dev/draxr/simulator/view"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// Extension adds to draxr-autoscaler what a build of it needs beyond the
// shipped binary: tests start real test nodes through it.
type Extension struct {
	AddFlags func(*pflag.FlagSet)
	// Launcher returns the local provider's machine launcher, or nil.
	Launcher func() (local.Launcher, error)
}

// NewCommand is draxr-autoscaler's command line.
func NewCommand(exts ...Extension) *cobra.Command {
	o := &options{}
	var compat *compatFlags
	cmd := &cobra.Command{
		Use:          "draxr-autoscaler",
		Short:        "Scale node groups for pods that ask for DRA-backed extended resources",
		Version:      kubeversion.Version(),
		SilenceUsage: true,
		// CA takes flags only; a stray word (a flag missing its --) is
		// an error, not ignored.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			warnings, err := o.check(compat, cmd.Flags())
			if err != nil {
				return err
			}
			for _, w := range warnings {
				klog.Warning(w + " (see docs/flags.md)")
			}
			if err := featuregates.Apply(o.featureGates); err != nil {
				return err
			}
			var launcher local.Launcher
			for _, ext := range exts {
				if ext.Launcher == nil {
					continue
				}
				l, err := ext.Launcher()
				if err != nil {
					return err
				}
				if l != nil {
					launcher = l
				}
			}
			// SIGTERM stops the loop, releases the lease and exits 0.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return run(ctx, o, launcher)
		},
	}
	o.addAllFlags(cmd.Flags())
	compat = addCompatFlags(cmd.Flags())
	for _, ext := range exts {
		if ext.AddFlags != nil {
			ext.AddFlags(cmd.Flags())
		}
	}
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	return cmd
}

// check takes the parsed flags: the Cluster Autoscaler flags draxr lacks
// (warnings, or an error), validation, and the defaults that depend on
// other flags.
func (o *options) check(compat *compatFlags, fs *pflag.FlagSet) ([]string, error) {
	warnings, err := compat.check()
	if err != nil {
		return nil, err
	}
	o.loopDefaults(fs)
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.dryRunDefaults(fs)
	return append(warnings, o.loopWarnings(fs)...), nil
}

// addAllFlags registers every flag draxr-autoscaler implements on fs,
// with the Cluster Autoscaler's word separator rule (--log-dir is
// --log_dir), as cli.Run sets it.
func (o *options) addAllFlags(fs *pflag.FlagSet) {
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	o.addFlags(fs)
	addLogFlags(fs)
}

func run(ctx context.Context, o *options, launcher local.Launcher) error {
	cfg, client, err := newClient(o)
	if err != nil {
		return err
	}
	// The informers come first: the kwok provider reads its groups'
	// members from the same node cache as the loop.
	factory := liveview.NewInformerFactory(client)
	cluster, err := liveview.WithPodGroups(liveview.FromInformers(factory), factory, client.Discovery())
	if err != nil {
		return err
	}
	provider, err := newProvider(ctx, o, cfg, client, launcher, cluster)
	if err != nil {
		return err
	}
	defer cleanupProvider(ctx, provider)
	profile, err := loadProfile(o.schedulerConfig)
	if err != nil {
		return err
	}
	broadcaster := newEventBroadcaster(ctx, o.caOptions.recordDuplicatedEvents)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "draxr-autoscaler"})
	exp, priorityFactory, err := newExpander(ctx, o, client, recorder)
	if err != nil {
		return err
	}
	requests, requestFactory, err := newProvisioningRequests(ctx, o, cfg, factory, &cluster)
	if err != nil {
		return err
	}
	bufferConfig, bufferFactory, err := newBuffers(o, cfg, client, factory, &cluster)
	if err != nil {
		return err
	}
	volcanoFactory, err := watchVolcano(ctx, o, cfg, &cluster)
	if err != nil {
		return err
	}
	cc := coreConfig(o, client, cluster, profile, exp, provider, recorder)
	cc.ProvisioningRequests, cc.Buffers = requests, bufferConfig
	// The handlers are registered before the informers start (in the
	// loop, once leading).
	trigger := looptrigger.New(o.trigger(), clock.RealClock{})
	cc.Hold = trigger.Hold
	// The metric set is the process's (component-base's legacy
	// registry): registered here, once; core only updates it.
	metrics.Register(o.emitPerNodeGroupMetrics)
	a := core.New(cc)

	if o.frequentLoops {
		if err := watchLoopEvents(trigger, factory, requestFactory, bufferFactory, cluster.PodGroups != nil); err != nil {
			return err
		}
	}

	check := health.New(o.maxInactivity, o.maxFailingTime, o.maxStartupTime, nil)
	// Listen before anything else: a port in use is a start-up error, not
	// a process running without its health check.
	listener, err := net.Listen("tcp", o.address)
	if err != nil {
		return fmt.Errorf("--address %s: %w", o.address, err)
	}
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	go serve(serveCtx, listener, check, o.profiling)

	factories := startable([]typedFactory{factory, priorityFactory, requestFactory},
		[]dynamicinformer.DynamicSharedInformerFactory{bufferFactory, volcanoFactory})
	loop := func(ctx context.Context) { runLeading(ctx, a, factories, trigger, check) }
	if !o.leaderElect {
		loop(ctx)
		return nil
	}
	return leaderElect(ctx, client, o, loop)
}

// cleanupProvider lets a provider that holds something release it, as CA
// does on exit. The run's context may be cancelled by then, so the
// cleanup gets a short one of its own.
func cleanupProvider(ctx context.Context, provider cloudprovider.Provider) {
	c, ok := provider.(interface{ Cleanup(context.Context) error })
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.Cleanup(cctx); err != nil {
		klog.FromContext(ctx).Error(err, "Provider cleanup")
	}
}

// coreConfig is the loop's configuration from the flags, but for the
// ProvisioningRequest and CapacityBuffer steps, which run sets.
func coreConfig(o *options, client kubernetes.Interface, cluster view.View, profile *schedulerProfile, exp expander.Strategy,
	provider cloudprovider.Provider, recorder record.EventRecorder) core.Config {
	statusName := o.statusConfigMap
	if !o.writeStatusConfigMap {
		statusName = ""
	}
	return core.Config{
		Client: client, View: cluster, Profile: profile, Expander: exp, MaxNodesTotal: o.maxNodesTotal,
		Provider: provider,
		ScaleDown: core.ScaleDownConfig{Enabled: o.scaleDownEnabled, UnneededTime: o.scaleDownUnneededTime,
			UtilizationThreshold: o.scaleDownUtilization, GpuUtilizationThreshold: &o.scaleDownGpuUtilization,
			UtilizationIgnores: o.utilizationIgnores,
			DelayAfterAdd:      o.scaleDownDelayAfterAdd,
			SimulationTimeout:  o.scaleDownSimulationTimeout, ScanInterval: o.scanInterval,
			ScaleDownActuation: o.scaleDownSafety.actuation()},
		Recorder:        recorder,
		DryRun:          o.dryRun,
		StatusNamespace: o.namespace, StatusName: statusName,
		ClusterState: o.failureOptions.clusterState(),
		Limits:       o.limits,
		Taints:       o.caOptions.taints(),
		Pods:         &o.pods, NewPodScaleUpDelay: o.newPodScaleUpDelay,
	}
}

// startable is the informer factories the loop starts, the steps' that
// are off (nil) left out.
func startable(typedFactories []typedFactory, dynamicFactories []dynamicinformer.DynamicSharedInformerFactory) []informerFactory {
	var factories []informerFactory
	for _, f := range typedFactories {
		// A nil pointer in the interface is a step that is off too.
		if f != nil && !reflect.ValueOf(f).IsNil() {
			factories = append(factories, typed{f})
		}
	}
	for _, f := range dynamicFactories {
		if f != nil {
			factories = append(factories, dynamicFactory{f})
		}
	}
	return factories
}

// runLeading is what the leader (or the only replica) does: start the informers
// and run loops until ctx ends.
func runLeading(ctx context.Context, a *core.Autoscaler, factories []informerFactory, trigger *looptrigger.Trigger, check *health.Check) {
	logger := klog.FromContext(ctx)
	// Monitoring starts with the loop: a standby replica is healthy.
	check.StartMonitoring()
	defer check.StopMonitoring()
	// As CA: Initializing until the first loop, deleted on exit.
	if err := a.WriteInitializingStatus(ctx); err != nil {
		logger.Error(err, "Writing the Initializing status ConfigMap")
	}
	defer func() {
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.DeleteStatus(delCtx); err != nil {
			logger.Error(err, "Deleting the status ConfigMap")
		}
	}()
	for _, f := range factories {
		f.Start(ctx.Done())
		if typ, ok := f.Synced(ctx.Done()); !ok {
			logger.Error(nil, "Informer did not sync", "type", typ)
			return
		}
	}
	runLoops(ctx, trigger, check, a.RunOnce)
}

// loopHealth is what the health check hears of loops.
type loopHealth interface {
	LoopStarted()
	LoopSucceeded()
}

// runLoops runs a loop whenever the trigger says (every --scan-interval,
// and with --frequent-loops-enabled after events and productive loops)
// until ctx ends.
func runLoops(ctx context.Context, trigger *looptrigger.Trigger, check loopHealth, runOnce func(context.Context) (*core.LoopResult, error)) {
	logger := klog.FromContext(ctx)
	for {
		if _, ok := trigger.Wait(ctx); !ok {
			return
		}
		check.LoopStarted()
		res, err := runOnce(ctx)
		if err != nil {
			logger.Error(err, "Autoscaler loop failed; retrying next loop")
		} else {
			check.LoopSucceeded()
		}
		trigger.LoopDone(res.Productive())
	}
}

// watchLoopEvents registers the handlers whose events start loops: pods
// the scheduler finds unschedulable, ProvisioningRequests and
// CapacityBuffers created or given a new spec (where those steps are on),
// and gangs whose last pod arrived (where PodGroups are read).
func watchLoopEvents(trigger *looptrigger.Trigger, factory informers.SharedInformerFactory, requests prinformers.SharedInformerFactory,
	buffers dynamicinformer.DynamicSharedInformerFactory, podGroups bool) error {
	pods := factory.Core().V1().Pods().Informer()
	type registration struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}
	regs := []registration{{pods, looptrigger.UnschedulablePods(trigger)}}
	if requests != nil {
		regs = append(regs, registration{requests.Autoscaling().V1().ProvisioningRequests().Informer(),
			looptrigger.SpecChanges(trigger, looptrigger.KindProvisioningRequest, looptrigger.ProvisioningRequestSpec)})
	}
	if buffers != nil {
		regs = append(regs, registration{buffers.ForResource(capacitybuffer.GroupVersionResource()).Informer(),
			looptrigger.SpecChanges(trigger, looptrigger.KindCapacityBuffer, looptrigger.UnstructuredSpec)})
	}
	if podGroups {
		gangs := looptrigger.NewGangs(trigger)
		regs = append(regs, registration{pods, gangs.Pods()},
			registration{factory.Scheduling().V1beta1().PodGroups().Informer(), gangs.PodGroups()})
	}
	for _, r := range regs {
		if _, err := r.informer.AddEventHandler(r.handler); err != nil {
			return err
		}
	}
	return nil
}

// newBuffers is the CapacityBuffer step's configuration and informer
// (registered, not started), or nil without --capacity-buffer-*-enabled.
// The API must be served (CA's CRD, in the chart).
func newBuffers(o *options, cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, cluster *view.View) (*buffers.Config, dynamicinformer.DynamicSharedInformerFactory, error) {
	if !o.bufferController && !o.bufferInjection {
		return nil, nil, nil
	}
	jsonCfg := liveview.JSONOnly(cfg)
	dyn, err := dynamic.NewForConfig(jsonCfg)
	if err != nil {
		return nil, nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(jsonCfg)
	if err != nil {
		return nil, nil, err
	}
	gvr := capacitybuffer.GroupVersionResource()
	if err := liveview.CheckServed(disco, gvr); err != nil {
		return nil, nil, fmt.Errorf("--capacity-buffer-*-enabled: the API server does not serve %s.%s (%v); "+
			"install the CRD (charts/draxr/crds/)", gvr.Resource, gvr.GroupVersion(), err)
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	*cluster = liveview.WithCapacityBuffers(*cluster, f, factory)
	writer, templates := buffers.NewStatusWriter(dyn), buffers.NewTemplateWriter(client, cluster.PodTemplates)
	if o.dryRun {
		writer, templates = buffers.DryRunWriter(), buffers.DryRunTemplates(cluster.PodTemplates)
	}
	return &buffers.Config{Cluster: *cluster, Templates: templates,
		Client: writer, Controller: o.bufferController, Injection: o.bufferInjection}, f, nil
}

// watchVolcano registers an informer on Volcano's PodGroups when its
// scheduler is among --bypassed-scheduler-names, so that its gangs are
// planned all or nothing; where Volcano's API is not served, its pods are
// planned one by one, and the log says so.
func watchVolcano(ctx context.Context, o *options, cfg *rest.Config, cluster *view.View) (dynamicinformer.DynamicSharedInformerFactory, error) {
	if !slices.Contains(o.pods.BypassedSchedulerNames, gang.VolcanoScheduler) {
		return nil, nil
	}
	jsonCfg := liveview.JSONOnly(cfg)
	disco, err := discovery.NewDiscoveryClientForConfig(jsonCfg)
	if err != nil {
		return nil, err
	}
	if liveview.CheckServed(disco, view.VolcanoPodGroupsResource()) != nil {
		klog.FromContext(ctx).Info("Volcano's PodGroups are not served: its pods are planned one by one", "resource", view.VolcanoPodGroupsResource().String())
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(jsonCfg)
	if err != nil {
		return nil, err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	*cluster = liveview.WithVolcanoPodGroups(*cluster, f)
	return f, nil
}

// informerFactory is what the loop starts and waits for: client-go's
// factories and the dynamic one alike.
type informerFactory interface {
	Start(stop <-chan struct{})
	// Synced waits for the caches; false names one that did not sync.
	Synced(stop <-chan struct{}) (string, bool)
}

// typedFactory is a typed informer factory (client-go's, CA's).
type typedFactory interface {
	Start(stop <-chan struct{})
	WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool
}

type typed struct{ typedFactory }

func (f typed) Synced(stop <-chan struct{}) (string, bool) {
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			return typ.String(), false
		}
	}
	return "", true
}

type dynamicFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
}

func (f dynamicFactory) Synced(stop <-chan struct{}) (string, bool) {
	for gvr, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			return gvr.String(), false
		}
	}
	return "", true
}

// newProvisioningRequests is the ProvisioningRequest processor with its
// informers (registered, not started), or nil without
// --enable-provisioning-requests. The API must be served: without CA's CRD
// the informer would never sync, so that is a start-up error.
func newProvisioningRequests(ctx context.Context, o *options, cfg *rest.Config, factory informers.SharedInformerFactory, cluster *view.View) (
	*provisioning.Processor, prinformers.SharedInformerFactory, error) {
	if !o.enableProvisioningRequests {
		return nil, nil, nil
	}
	client, err := prclient.NewForConfig(liveview.JSONOnly(cfg))
	if err != nil {
		return nil, nil, err
	}
	gv := prv1.SchemeGroupVersion.String()
	if err := liveview.CheckServed(client.Discovery(), prv1.SchemeGroupVersion.WithResource("provisioningrequests")); err != nil {
		return nil, nil, fmt.Errorf("--enable-provisioning-requests: the API server does not serve provisioningrequests.%s (%v); "+
			"install the CRD (the chart's provisioningRequests.installCRD, or charts/draxr/crds/)", gv, err)
	}
	prFactory := prinformers.NewSharedInformerFactory(client, 0)
	pcfg := o.provReqOptions.processorConfig()
	*cluster = liveview.WithProvisioningRequests(*cluster, prFactory, factory)
	pcfg.Requests, pcfg.Templates = cluster.ProvisioningRequests, cluster.PodTemplates
	pcfg.Client = provisioning.NewClient(client)
	if o.dryRun {
		pcfg.Client = provisioning.DryRunClient(pcfg.Client)
	}
	klog.FromContext(ctx).Info("Serving ProvisioningRequests", "batch", pcfg.BatchProcessing, "processorInstance", pcfg.ProcessorInstance)
	return provisioning.New(pcfg), prFactory, nil
}

// The local provider's own API rate: many kubelets' worth.
const localProviderQPS, localProviderBurst = 50, 100

// The kwok provider's: a cloud's instance API, which the autoscaler's
// --kube-client-qps does not throttle; 5,000 nodes are 10,000 requests
// (Node and ResourceSlice).
const kwokProviderQPS, kwokProviderBurst = 200, 400

// newProvider builds the --cloud-provider's provider.
// Every provider reads the workload cluster's Nodes and ResourceSlices
// from the loop's View.
func newProvider(ctx context.Context, o *options, cfg *rest.Config, client kubernetes.Interface, launcher local.Launcher,
	cluster view.View) (cloudprovider.Provider, error) {
	switch o.cloudProvider {
	case clusterapi.Name:
		return newClusterAPIProvider(ctx, o, cfg, client, cluster)
	case externalgrpc.Name:
		return newExternalGRPCProvider(o, client, cluster)
	case kwok.Name:
		return newKwokProvider(ctx, o, cfg, cluster)
	}
	objs, err := input.LoadPaths(o.nodeGroupConfig)
	if err != nil {
		return nil, fmt.Errorf("--node-group-config: %w", err)
	}
	if len(objs.NodeGroups) == 0 {
		return nil, fmt.Errorf("--node-group-config: no NodeGroup objects found")
	}
	// The local provider stands in for the cloud and for the new nodes'
	// kubelets, which do not share the autoscaler's --kube-client-qps: on
	// the autoscaler's client, readying 75 nodes (three writes each) took
	// a minute of throttled requests before anything could bind.
	providerCfg := rest.CopyConfig(cfg)
	providerCfg.QPS, providerCfg.Burst = localProviderQPS, localProviderBurst
	providerClient, err := kubernetes.NewForConfig(providerCfg)
	if err != nil {
		return nil, err
	}
	p, err := local.New(local.Options{Client: providerClient, Groups: objs.NodeGroups,
		Nodes: cluster.Nodes, Slices: cluster.Slices,
		NodeReadyDelay: o.localNodeReadyDelay, SlicesDelay: o.localSlicesDelay, Launcher: launcher, ReadOnly: o.dryRun})
	if err != nil {
		return nil, fmt.Errorf("--node-group-config: %w", err)
	}
	return p, nil
}

// newKwokProvider reads CA's kwok-provider-config ConfigMap: its name
// from $KWOK_PROVIDER_CONFIGMAP, its namespace from $POD_NAMESPACE (as CA
// finds them), else --namespace.
func newKwokProvider(ctx context.Context, o *options, cfg *rest.Config, cluster view.View) (cloudprovider.Provider, error) {
	providerCfg := rest.CopyConfig(cfg)
	providerCfg.QPS, providerCfg.Burst = kwokProviderQPS, kwokProviderBurst
	providerClient, err := kubernetes.NewForConfig(providerCfg)
	if err != nil {
		return nil, err
	}
	namespace := os.Getenv(kwok.NamespaceEnv)
	if namespace == "" {
		namespace = o.namespace
	}
	return kwok.New(ctx, kwok.Options{Client: providerClient, Namespace: namespace, ConfigName: os.Getenv(kwok.ConfigMapEnv),
		Nodes: cluster.Nodes, Slices: cluster.Slices, ReadOnly: o.dryRun})
}

// newClusterAPIProvider: node groups are the management cluster's
// MachineDeployments, MachineSets and MachinePools; cfg and client reach
// the workload cluster (nodes, pods, the lease and status).
func newClusterAPIProvider(ctx context.Context, o *options, cfg *rest.Config, client kubernetes.Interface,
	cluster view.View) (cloudprovider.Provider, error) {
	mgmtCfg, mgmtClient, err := managementCluster(o, cfg, client)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(mgmtCfg)
	if err != nil {
		return nil, err
	}
	return clusterapi.New(clusterapi.Options{Dynamic: dyn, Kube: mgmtClient, Workload: client, Nodes: cluster.Nodes,
		Slices:        cluster.Slices,
		WatchUntil:    ctx.Done(),
		AutoDiscovery: o.nodeGroupAutoDiscovery,
		Taints:        o.caOptions.taints(), TemplateCacheExpiry: o.caOptions.nodeInfoCacheExpireTime})
}

// newExternalGRPCProvider: node groups are the provider service's; the
// connection is opened lazily, so an unreachable service shows in the
// loops' errors (and health), not as a failed start.
func newExternalGRPCProvider(o *options, client kubernetes.Interface, cluster view.View) (cloudprovider.Provider, error) {
	c, err := externalgrpc.ReadConfig(o.cloudConfig)
	if err != nil {
		return nil, err
	}
	conn, err := c.Dial()
	if err != nil {
		return nil, err
	}
	return externalgrpc.New(externalgrpc.Options{Client: protos.NewCloudProviderClient(conn), Conn: conn, Timeout: c.Timeout(),
		Kube: client, Nodes: cluster.Nodes, Slices: cluster.Slices, TemplateConfigMap: c.TemplateSlicesConfigMap, Taints: o.caOptions.taints(),
		TemplateCacheExpiry: o.caOptions.nodeInfoCacheExpireTime})
}

// managementCluster is where the Cluster API objects live, chosen as CA
// chooses it: --cloud-config; else, unless
// --clusterapi-cloud-config-authoritative, the --kubeconfig (workload)
// cluster itself; else the in-cluster configuration. CA's topologies
// follow: one cluster, a management cluster reached by --cloud-config
// while the autoscaler runs in the workload cluster, and the autoscaler
// in the management cluster reaching the workload by --kubeconfig.
func managementCluster(o *options, workloadCfg *rest.Config, workload kubernetes.Interface) (*rest.Config, kubernetes.Interface, error) {
	if o.cloudConfig == "" && !o.cloudConfigAuthoritative {
		return workloadCfg, workload, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.cloudConfig)
	if err != nil {
		if o.cloudConfig == "" {
			return nil, nil, fmt.Errorf("management cluster (in-cluster, --clusterapi-cloud-config-authoritative without --cloud-config): %w", err)
		}
		return nil, nil, fmt.Errorf("management cluster (--cloud-config=%s): %w", o.cloudConfig, err)
	}
	o.caOptions.restConfig(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	return cfg, client, err
}

// errLostLease ends the process when another replica took the lease
// while this one was leading (not on shutdown), so it restarts clean.
var errLostLease = errors.New("lost the leader lease")

func leaderElect(ctx context.Context, client kubernetes.Interface, o *options, loop func(context.Context)) error {
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	id = fmt.Sprintf("%s_%d", id, os.Getpid())
	lock, err := resourcelock.New(o.resourceLock, o.namespace, o.leaderElectLeaseName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	var led atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: o.leaderElectLeaseName,
		LeaseDuration: o.leaderElectLeaseTimeout, RenewDeadline: o.leaderElectRenewDeadline, RetryPeriod: o.leaderElectRetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				led.Store(true)
				loop(ctx)
			},
			OnStoppedLeading: func() { klog.FromContext(ctx).Info("Stopped leading") },
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	if ctx.Err() == nil && led.Load() {
		return errLostLease
	}
	return nil
}

// serve exposes /metrics and CA's /health-check, with /healthz as an
// alias, and with profiling Go's profiles at /debug/pprof/ (as CA's
// --profiling), on the listener until ctx ends.
func serve(ctx context.Context, l net.Listener, check http.Handler, profiling bool) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.Handle("/health-check", check)
	mux.Handle("/healthz", check)
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.FromContext(ctx).Error(err, "Serving /metrics and /health-check", "address", l.Addr())
	}
}

// newClient connects with the kubeconfig file, or in-cluster credentials
// when it is "" (client-go's BuildConfigFromFlags falls back to them),
// with CA's client flags applied.
func newClient(o *options) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags(o.master, o.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	o.caOptions.restConfig(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	return cfg, client, err
}

// newExpander builds --expander. The priority expander reads
// --expander-priorities when given, else CA's priority ConfigMap in
// --namespace through an informer on that one ConfigMap (returned, to be
// started with the others).
func newExpander(ctx context.Context, o *options, client kubernetes.Interface, recorder record.EventRecorder) (expander.Strategy, informers.SharedInformerFactory, error) {
	seed := time.Now().UnixNano()
	if !expanderUsesPriority(o.expander) || o.expanderPriorities != "" {
		exp, err := expander.NewFromFile(o.expander, o.expanderPriorities, seed)
		return exp, nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(o.namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", core.PriorityConfigMapName).String()
		}))
	p := &core.PriorityConfigMap{Lister: f.Core().V1().ConfigMaps().Lister().ConfigMaps(o.namespace), Recorder: recorder,
		Logger: klog.FromContext(ctx)}
	exp, err := expander.NewWithPriority(o.expander, p.Filter, seed)
	return exp, f, err
}

func loadProfile(path string) (*schedulerProfile, error) {
	if path == "" {
		return nil, nil
	}
	return placement.LoadProfile(path, "")
}

type schedulerProfile = config.KubeSchedulerProfile

// newEventBroadcaster is the loop's event broadcaster. As CA's without
// --record-duplicated-events, an event already written in the last 5
// minutes is not written again: a pod pending for an hour gets its
// NotTriggerScaleUp once per 5 minutes, not every loop, and the events
// of a large backlog do not queue at --kube-client-qps ahead of the
// loop's other writes (a 32-pod backlog delayed a ProvisioningRequest's
// TriggeredScaleUp by minutes). CA keys the filter by object and reason;
// the message is in draxr's key too, so that a changed reason is written
// at once.
func newEventBroadcaster(ctx context.Context, recordDuplicated bool) record.EventBroadcaster {
	if recordDuplicated {
		return record.NewBroadcaster(record.WithContext(ctx))
	}
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS: 1. / 300, BurstSize: 1, LRUCacheSize: 8192, SpamKeyFunc: eventKey}))
}

// eventKey is what makes two events the same for the 5-minute filter.
func eventKey(e *v1.Event) string {
	o := e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion,
		e.Type, e.Reason, e.Message}, "\x00")
}
