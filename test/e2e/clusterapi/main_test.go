// Package clusterapi runs draxr-autoscaler's clusterapi provider against a
// real control plane with Cluster API's own MachineDeployment, MachineSet
// and Machine controllers running in this process, and draxr's test
// infrastructure provider (test/clusterapi/infra) standing in for a cloud.
package clusterapi

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	machinecontroller "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	mdcontroller "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	mscontroller "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"draxr.dev/draxr/test/auditlog"
	"draxr.dev/draxr/test/clusterapi/infra"
	"draxr.dev/draxr/test/controlplane"
)

var (
	cp   *controlplane.ControlPlane
	root string
	bins string
	// cpBin holds etcd, kube-apiserver and kube-controller-manager, for
	// tests that start a second (workload) control plane.
	cpBin string
	// workloads are the workload clusters of namespaces whose Cluster is
	// not this control plane: the test infrastructure provider creates
	// their machines' Nodes there.
	workloads sync.Map // namespace -> kubernetes.Interface

	// Tallies for the summary line.
	podsBound, machinesCreated, machinesRemoved atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return 0 // needs a control plane: make test-unit leaves it out
	}
	start := time.Now()
	var err error
	if root, err = controlplane.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e:", err)
		return 1
	}
	binDir, err := controlplane.Build(root)
	cpBin = binDir
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e: control plane:", err)
		return 1
	}
	if bins, err = os.MkdirTemp("", "draxr-capi-e2e-bin"); err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e:", err)
		return 1
	}
	defer os.RemoveAll(bins)
	if out, err := goCmd("build", "-o", bins+"/", "./scheduler/cmd/draxr-scheduler", "./autoscaler/cmd/draxr-autoscaler", "./autoscaler/cmd/draxr").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "clusterapi e2e: build draxr binaries: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, startCancel := context.WithTimeout(ctx, 5*time.Minute)
	defer startCancel()
	// The autoscaler's requests (only) are audited: a steady loop must
	// send no LIST of what it watches (auditlog).
	cp, err = controlplane.Start(startCtx, controlplane.Options{BinDir: binDir, AuditUsers: []string{auditlog.AutoscalerUser}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e: start control plane:", err)
		return 1
	}
	defer cp.Stop()
	if _, err := cp.StartScheduler(startCtx, controlplane.SchedulerOptions{
		Binary: filepath.Join(bins, "draxr-scheduler"), Config: filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		RBAC: filepath.Join(root, "scheduler/deploy/rbac.yaml"), ServiceAccount: "kube-system/draxr-scheduler", Name: "draxr-scheduler",
	}); err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e: start draxr-scheduler:", err)
		return 1
	}
	if err := installCRDs(startCtx); err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e: CRDs:", err)
		return 1
	}
	if err := startCAPI(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "clusterapi e2e: Cluster API controllers:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		// To a file: printed here, the control plane's logs would bury the
		// failed test's message and its autoscaler log, which CI shows the
		// end of.
		path := filepath.Join(os.TempDir(), "draxr-capi-e2e-controlplane.log")
		if err := os.WriteFile(path, []byte(cp.Logs()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, cp.Logs())
		} else {
			fmt.Fprintln(os.Stderr, "clusterapi e2e: control plane logs in", path)
		}
	}
	fmt.Printf("clusterapi e2e: %d pods bound, %d machines created, %d removed, %d s\n",
		podsBound.Load(), machinesCreated.Load(), machinesRemoved.Load(), int(time.Since(start).Seconds()))
	return code
}

// installCRDs creates CAPI's core CRDs from the module and the test
// provider's, and waits until they are served.
func installCRDs(ctx context.Context) error {
	out, err := goCmd("list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		return fmt.Errorf("locate sigs.k8s.io/cluster-api: %w", err)
	}
	bases := filepath.Join(strings.TrimSpace(string(out)), "core", "config", "crd", "bases")
	var paths []string
	for _, name := range []string{"clusters", "machines", "machinesets", "machinedeployments", "machinepools", "machinedrainrules"} {
		paths = append(paths, filepath.Join(bases, "cluster.x-k8s.io_"+name+".yaml"))
	}
	crds, err := controlplane.ReadCRDs(paths...)
	if err != nil {
		return err
	}
	return cp.InstallCRDs(ctx, append(crds, infra.CRDs()...)...)
}

// startCAPI runs CAPI's MachineDeployment, MachineSet and Machine
// reconcilers (public packages of sigs.k8s.io/cluster-api v1.14.2) and the
// test infrastructure provider in a controller-runtime manager.
func startCAPI(ctx context.Context) error {
	ctrl.SetLogger(klog.NewKlogr())
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	const name = "draxr-capi-e2e"
	mgr, err := ctrl.NewManager(cp.AdminConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  setup.ManagerCacheOptions(scheme, name, "", 10*time.Minute),
		Client:                 setup.ManagerClientOptions(),
	})
	if err != nil {
		return err
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return err
	}
	secrets, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return err
	}
	cache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(name, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		return err
	}
	c := client.WithFieldOwner(mgr.GetClient(), "manager")
	if err := (&mdcontroller.Reconciler{Client: c, APIReader: mgr.GetAPIReader()}).
		SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return fmt.Errorf("MachineDeployment reconciler: %w", err)
	}
	if err := (&mscontroller.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), ClusterCache: cache}).
		SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return fmt.Errorf("MachineSet reconciler: %w", err)
	}
	if err := (&machinecontroller.Reconciler{Client: c, APIReader: mgr.GetAPIReader(), ClusterCache: cache,
		RemoteConditionsGracePeriod: 5 * time.Minute}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
		return fmt.Errorf("Machine reconciler: %w", err)
	}
	workloadOf := func(ns string) kubernetes.Interface {
		if k, ok := workloads.Load(ns); ok {
			return k.(kubernetes.Interface)
		}
		return nil
	}
	if err := (&infra.Reconciler{Client: mgr.GetClient(), Kube: cp.Client, WorkloadOf: workloadOf, ReadyDelay: 2 * time.Second}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("test infrastructure provider: %w", err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "clusterapi e2e: manager:", err)
		}
	}()
	return nil
}

func goCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	return cmd
}
