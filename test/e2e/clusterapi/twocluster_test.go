package clusterapi

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/clusterapi/infra"
	"draxr.dev/draxr/test/controlplane"
)

// CA's separate management cluster topology: the Cluster API objects
// (and Cluster API's controllers, and the infrastructure provider) in one
// control plane, nodes, pods and draxr-scheduler in another. The
// autoscaler runs "in" the workload cluster (--kubeconfig) and reaches
// the management cluster by --cloud-config, as CA's chart does with
// clusterAPIMode incluster-kubeconfig; its lease and status stay in the
// workload cluster. It scales 0 -> 3 -> min 1 across the two.
func TestSeparateManagementCluster(t *testing.T) {
	const wns = "capi-two-clusters"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	wl, err := controlplane.Start(ctx, controlplane.Options{BinDir: cpBin})
	if err != nil {
		t.Fatal("start the workload control plane:", err)
	}
	defer wl.Stop()
	if _, err := wl.StartScheduler(ctx, controlplane.SchedulerOptions{
		Binary: filepath.Join(bins, "draxr-scheduler"), Config: filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		RBAC: filepath.Join(root, "scheduler/deploy/rbac.yaml"), ServiceAccount: "kube-system/draxr-scheduler", Name: "draxr-scheduler",
	}); err != nil {
		t.Fatal("start draxr-scheduler on the workload cluster:", err)
	}
	workloads.Store(wns, wl.Client)
	defer workloads.Delete(wns)

	// Management cluster: the Cluster (its kubeconfig secret reaches the
	// workload cluster), the infrastructure template, the MachineDeployment.
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	setupClusterOf(ctx, t, dyn, wns, wl.AdminKubeconfig)
	tmpl, err := infra.Template(wns, "gpu", eightGPUs(), "8", false)
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, tmpl)
	slicesJSON, err := yaml.Marshal(eightGPUs())
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, machineDeployment(wns, "gpu", map[string]string{
		capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "5",
		capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
		capi.TemplateSlicesAnnotation: string(slicesJSON),
	}))

	// Workload cluster: the DeviceClass and the pods.
	createGPUClass(ctx, t, wl.Client)
	if _, err := wl.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Each cluster grants the autoscaler's ServiceAccount only there.
	rbac := filepath.Join(root, "autoscaler/deploy/rbac.yaml")
	workloadKubeconfig, err := wl.ServiceAccountKubeconfig(ctx, "draxr-autoscaler-workload", rbac, "kube-system/draxr-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	managementKubeconfig, err := cp.ServiceAccountKubeconfig(ctx, "draxr-autoscaler-management", rbac, "kube-system/draxr-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	// The names the chart's RBAC grants (by resourceNames): the lease and
	// the status ConfigMap are the defaults.
	lease, status := "draxr-autoscaler", core.DefaultStatusConfigMapName
	p, err := wl.StartProcess("draxr-autoscaler-two-clusters", filepath.Join(bins, "draxr-autoscaler"),
		"--kubeconfig="+workloadKubeconfig, "--cloud-config="+managementKubeconfig, "--cloud-provider=clusterapi",
		"--node-group-auto-discovery=clusterapi:namespace="+wns+",clusterName="+clusterName,
		"--scheduler-config="+filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		"--scan-interval=1s", "--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s",
		"--leader-elect=true",
		"--address=127.0.0.1:0", "--v=2")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("autoscaler log:\n%s", p.LogTail(8000))
		}
		p.Stop(10 * time.Second)
	}()

	if _, err := wl.Client.AppsV1().ReplicaSets(wns).Create(ctx, trainReplicaSet(wns, 20), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 4*time.Minute, "20 pods bound in the workload cluster", func() error {
		bound, err := boundIn(ctx, wl.Client, wns)
		if err != nil {
			return err
		}
		if bound != 20 {
			return fmt.Errorf("%d of 20 bound", bound)
		}
		return nil
	})
	podsBound.Add(20)
	if got := replicas(ctx, t, dyn, wns, capi.MachineDeployment, "gpu"); got != 3 {
		t.Fatalf("management MachineDeployment replicas = %d, want 3 (20 one-GPU pods on 8-GPU nodes)", got)
	}
	machines := machineNames(ctx, t, dyn, wns)
	machinesCreated.Add(int64(len(machines)))
	workloadNodes := providerNodesIn(ctx, t, wl.Client, wns)
	if len(machines) != 3 || workloadNodes != 3 {
		t.Fatalf("machines %v in the management cluster, %d nodes in the workload cluster; want 3 and 3", machines, workloadNodes)
	}
	if n := providerNodesIn(ctx, t, cp.Client, wns); n != 0 {
		t.Errorf("%d of the machines' nodes registered in the management cluster, want none", n)
	}

	// Leader election and status live in the workload cluster, as CA keeps them.
	if _, err := wl.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{}); err != nil {
		t.Errorf("lease %s in the workload cluster: %v", lease, err)
	}
	if _, err := cp.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease %s in the management cluster: %v, want none", lease, err)
	}
	// (Other tests write a status ConfigMap of that name in the management
	// cluster: this one is told by its group.)
	group := capi.MachineDeployment + "/" + wns + "/gpu"
	if cm, err := wl.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, status, metav1.GetOptions{}); err != nil {
		t.Errorf("status ConfigMap %s in the workload cluster: %v", status, err)
	} else if !strings.Contains(cm.Data[core.StatusKey], group) {
		t.Errorf("status ConfigMap %s in the workload cluster does not name group %s:\n%s", status, group, cm.Data[core.StatusKey])
	}

	// Down to the min size, 1, once the pods are gone.
	setMinSize(ctx, t, dyn, wns, "gpu", 1)
	if err := wl.Client.AppsV1().ReplicaSets(wns).Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 3*time.Minute, "one machine and one workload node left", func() error {
		if got := replicas(ctx, t, dyn, wns, capi.MachineDeployment, "gpu"); got != 1 {
			return fmt.Errorf("replicas = %d", got)
		}
		if left := machineNames(ctx, t, dyn, wns); len(left) != 1 {
			return fmt.Errorf("machines = %v", left)
		}
		if n := providerNodesIn(ctx, t, wl.Client, wns); n != 1 {
			return fmt.Errorf("%d nodes in the workload cluster", n)
		}
		return nil
	})
	machinesRemoved.Add(2)
	consistently(t, 3500*time.Millisecond, "never below min", func() error {
		if got := replicas(ctx, t, dyn, wns, capi.MachineDeployment, "gpu"); got != 1 {
			return fmt.Errorf("replicas = %d", got)
		}
		return nil
	})
	fmt.Printf("clusterapi two-cluster e2e: management %s held the Cluster, MachineDeployment and 3 machines (2 removed); "+
		"workload %s held 20 pods bound, 3 nodes (1 left), the lease %s and the status %s\n", cp.URL, wl.URL, lease, status)
}

func boundIn(ctx context.Context, c kubernetes.Interface, namespace string) (int, error) {
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	bound := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			bound++
		}
	}
	return bound, nil
}

// providerNodesIn counts the test provider's nodes of namespace's machines.
func providerNodesIn(ctx context.Context, t *testing.T, c kubernetes.Interface, namespace string) int {
	t.Helper()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: infra.NamespaceLabel + "=" + namespace})
	if err != nil {
		t.Fatal(err)
	}
	return countProviderNodes(nodes.Items)
}
