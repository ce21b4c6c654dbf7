package clusterapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cpclusterapi "draxr.dev/draxr/cloudprovider/clusterapi"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/auditlog"
	"draxr.dev/draxr/test/clusterapi/infra"
	"draxr.dev/draxr/test/controlplane"
)

const (
	ns          = "capi-e2e"
	clusterName = "c1"
	driver      = "gpu.example.com"
	gpuResource = v1.ResourceName("example.com/gpu")
)

func eightGPUs() []resourceapi.ResourceSliceSpec {
	spec := resourceapi.ResourceSliceSpec{Driver: driver}
	for i := range 8 {
		spec.Devices = append(spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return []resourceapi.ResourceSliceSpec{spec}
}

// A MachineDeployment at zero with template slices of 8 GPUs, 20 pending
// one-GPU pods: replicas become exactly 3 and stay there, the pods bind;
// with the pods gone, machines are removed through delete-machine down to
// the min size and no further.
func TestScaleFromZeroAndBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	setupCluster(ctx, t, dyn, ns)
	createGPUClass(ctx, t, cp.Client)
	tmpl, err := infra.Template(ns, "gpu", eightGPUs(), "8", false)
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, tmpl)
	slicesJSON, err := yaml.Marshal(eightGPUs())
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, machineDeployment(ns, "gpu", map[string]string{
		capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "5",
		capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
		capi.TemplateSlicesAnnotation: string(slicesJSON),
	}))

	addr := startAutoscaler(t, ns)
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, trainReplicaSet(ns, 20), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(ctx, t, 3*time.Minute, "20 pods bound", func() error {
		bound, err := boundPods(ctx, ns)
		if err != nil {
			return err
		}
		if bound != 20 {
			return fmt.Errorf("%d of 20 bound", bound)
		}
		return nil
	})
	podsBound.Add(20)
	if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "gpu"); got != 3 {
		t.Fatalf("MachineDeployment replicas = %d, want 3", got)
	}
	machines := machineNames(ctx, t, dyn, ns)
	machinesCreated.Add(int64(len(machines)))
	if len(machines) != 3 {
		t.Fatalf("machines = %v, want 3", machines)
	}
	// No further scale-up within three loops (--scan-interval=1s), and
	// those steady loops read Nodes, slices and the Cluster API kinds from
	// the provider's watches: the audit log holds no LIST of them.
	noListsWhile(ctx, t, addr, 3, func() {
		consistently(t, 3500*time.Millisecond, "replicas stay 3", func() error {
			if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "gpu"); got != 3 {
				return fmt.Errorf("replicas = %d", got)
			}
			return nil
		})
	})

	// Scale down to the min size, never below: raise min to 1 first.
	setMinSize(ctx, t, dyn, ns, "gpu", 1)
	recorder := recordMachines(ctx, t, dyn, ns)
	if err := cp.Client.AppsV1().ReplicaSets(ns).Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 3*time.Minute, "one machine left", func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "gpu"); got != 1 {
			return fmt.Errorf("replicas = %d", got)
		}
		if left := machineNames(ctx, t, dyn, ns); len(left) != 1 {
			return fmt.Errorf("machines = %v", left)
		}
		// This test's nodes only: earlier tests leave theirs.
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: infra.NamespaceLabel + "=" + ns})
		if err != nil {
			return err
		}
		if n := countProviderNodes(nodes.Items); n != 1 {
			return fmt.Errorf("%d test-provider nodes in %s", n, ns)
		}
		return nil
	})
	left := machineNames(ctx, t, dyn, ns)
	machinesRemoved.Add(int64(len(machines) - len(left)))
	if !contains(machines, left[0]) {
		t.Errorf("the remaining machine %s is not one of the three created (%v)", left[0], machines)
	}
	// The exact machines chosen are the ones removed: the nodes of the
	// autoscaler's ScaleDown events, the Machines it marked, the Machines
	// CAPI deleted are the same two, and the third is untouched.
	eventually(ctx, t, 30*time.Second, "the chosen machines are the removed ones", func() error {
		return recorder.chosenAreRemoved(ctx, 2)
	})
	if marked, _ := recorder.sets(); contains(marked, left[0]) {
		t.Errorf("the remaining machine %s was marked for deletion (%s)", left[0], recorder)
	}
	consistently(t, 3500*time.Millisecond, "never below min", func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "gpu"); got != 1 {
			return fmt.Errorf("replicas = %d", got)
		}
		return nil
	})
}

// createGPUClass makes the test driver's DeviceClass, backing gpuResource.
func createGPUClass(ctx context.Context, t *testing.T, c kubernetes.Interface) {
	t.Helper()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: resourceapi.DeviceClassSpec{
		ExtendedResourceName: ptr.To(string(gpuResource)),
		Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}},
	}}
	if _, err := c.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// trainReplicaSet is n pods of one GPU each (gpuResource).
func trainReplicaSet(namespace string, n int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}}, Spec: v1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/train",
					Resources: v1.ResourceRequirements{Limits: v1.ResourceList{gpuResource: resource.MustParse("1")}}}},
			}}},
	}
}

func setupCluster(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) {
	t.Helper()
	setupClusterOf(ctx, t, dyn, ns, cp.AdminKubeconfig)
}

// setupClusterOf makes namespace ns's Cluster, whose workload cluster is
// the one workloadKubeconfig reaches.
func setupClusterOf(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, workloadKubeconfig string) {
	t.Helper()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Cluster's kubeconfig secret lets CAPI's ClusterCache reach the
	// workload cluster (for most tests this same API server).
	kubeconfig, err := os.ReadFile(workloadKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: clusterName + "-kubeconfig", Namespace: ns,
		Labels: map[string]string{capi.ClusterNameLabel: clusterName}}, Data: map[string][]byte{"value": kubeconfig}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bootstrap := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "no-bootstrap", Namespace: ns}, Data: map[string][]byte{"value": []byte("#!/bin/true")}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, bootstrap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capi.APIVersion, "kind": "Cluster",
		"metadata": map[string]any{"name": clusterName, "namespace": ns},
		// v1beta2 wants a non-empty spec; nothing else is needed here.
		"spec": map[string]any{"paused": false},
	}}
	created := create(ctx, t, dyn, cluster)
	// No Cluster controller runs: the test says the infrastructure and the
	// control plane are up, as their providers would.
	now := time.Now().UTC().Format(time.RFC3339)
	created.Object["status"] = map[string]any{
		"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true},
		"conditions": []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "set by the test",
			"lastTransitionTime": now, "observedGeneration": created.GetGeneration()}},
	}
	if _, err := dyn.Resource(cpclusterapi.GVR("Cluster")).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func machineDeployment(ns, name string, annotations map[string]string) *unstructured.Unstructured {
	return scalableResource(capi.MachineDeployment, ns, name, annotations)
}

// scalableResource is a MachineDeployment or a MachineSet (their specs
// share these fields) at zero replicas, its machines built from the
// infrastructure template of the same name.
func scalableResource(kind, ns, name string, annotations map[string]string) *unstructured.Unstructured {
	labels := map[string]any{"pool": name}
	ann := map[string]any{}
	for k, v := range annotations {
		ann[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capi.APIVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": ann,
			"labels": map[string]any{capi.ClusterNameLabel: clusterName}},
		"spec": map[string]any{
			"clusterName": clusterName,
			"replicas":    int64(0),
			"selector":    map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"clusterName": clusterName,
					// Bootstrap is skipped the way CAPI allows.
					"bootstrap":         map[string]any{"dataSecretName": "no-bootstrap"},
					"infrastructureRef": map[string]any{"apiGroup": infra.Group, "kind": infra.TemplateKind, "name": name},
				},
			},
		},
	}}
	// CAPI's defaulting webhooks do not run here: set what they would.
	spec := u.Object["spec"].(map[string]any)
	spec["deletion"] = map[string]any{"order": "Random"}
	if kind == capi.MachineDeployment {
		spec["rollout"] = map[string]any{"strategy": map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)}}}
	}
	return u
}

func create(ctx context.Context, t *testing.T, dyn dynamic.Interface, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gv := strings.Split(u.GetAPIVersion(), "/")
	gvr := cpclusterapi.GVR(u.GetKind())
	gvr.Group, gvr.Version = gv[0], gv[1]
	created, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return created
}

func get(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(cpclusterapi.GVR(kind)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func replicas(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, kind, name string) int64 {
	t.Helper()
	r, _, _ := unstructured.NestedInt64(get(ctx, t, dyn, ns, kind, name).Object, "spec", "replicas")
	return r
}

// machineNames lists the Machines not being deleted.
func machineNames(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns string) []string {
	t.Helper()
	list, err := dyn.Resource(cpclusterapi.GVR(capi.Machine)).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list.Items {
		if m.GetDeletionTimestamp() == nil {
			out = append(out, m.GetName())
		}
	}
	return out
}

func boundPods(ctx context.Context, ns string) (int, error) { return boundIn(ctx, cp.Client, ns) }

func countProviderNodes(nodes []v1.Node) int {
	n := 0
	for _, node := range nodes {
		if strings.HasPrefix(node.Spec.ProviderID, infra.ProviderIDPrefix) {
			n++
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// startAutoscaler runs draxr-autoscaler for namespace ns's Cluster as
// the shipped ServiceAccount (whose requests the audit log holds), and
// returns where it serves /metrics.
func startAutoscaler(t *testing.T, ns string, extraArgs ...string) string {
	t.Helper()
	ctx := context.Background()
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, "draxr-autoscaler-capi",
		filepath.Join(root, "autoscaler/deploy/rbac.yaml"), "kube-system/draxr-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--kubeconfig=" + kubeconfig, "--cloud-provider=clusterapi",
		"--node-group-auto-discovery=clusterapi:namespace=" + ns + ",clusterName=" + clusterName,
		"--scheduler-config=" + filepath.Join(root, "scheduler/deploy/scheduler-config.yaml"),
		"--scan-interval=1s", "--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s",
		"--leader-elect=false", "--status-config-map-name=" + statusConfigMap(ns), "--address=" + addr, "--v=2"}
	p, err := cp.StartProcess("draxr-autoscaler-"+ns, filepath.Join(bins, "draxr-autoscaler"), append(args, extraArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("autoscaler log:\n%s", p.LogTail(8000))
		}
		p.Stop(10 * time.Second)
	})
	return addr
}

// noListsWhile runs during (a check that nothing changes), then waits
// until loops whole loops of the autoscaler at addr have passed since it
// began, and fails the test if those steady loops sent a LIST of what the
// autoscaler watches (Nodes, ResourceSlices, the Cluster API kinds): the
// audit log says what they sent.
func noListsWhile(ctx context.Context, t *testing.T, addr string, loops int, during func()) {
	t.Helper()
	counts, n, err := auditlog.SteadyLoops(ctx, cp.AuditLog, addr, loops, during)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit: %.0f steady loops, the autoscaler's requests: %s", n, counts)
}

// begin starts a test in namespace ns with its Cluster: a context of 5
// minutes and a dynamic client.
func begin(t *testing.T, ns string) (context.Context, dynamic.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	setupCluster(ctx, t, dyn, ns)
	return ctx, dyn
}

// replicasStay checks the MachineDeployment name has want replicas, and
// keeps them for 3.5 s (several loops); why says where want comes from.
func replicasStay(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, name string, want int64, why string) {
	t.Helper()
	if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, name); got != want {
		t.Fatalf("MachineDeployment replicas = %d, want %d (%s)", got, want, why)
	}
	machinesCreated.Add(int64(len(machineNames(ctx, t, dyn, ns))))
	consistently(t, 3500*time.Millisecond, fmt.Sprintf("replicas stay %d", want), func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, name); got != want {
			return fmt.Errorf("replicas = %d", got)
		}
		return nil
	})
}

func eventually(ctx context.Context, t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, d, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// consistently checks cond every 250ms for d.
func consistently(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// setMinSize sets a MachineDeployment's min-size annotation. Cluster
// API's controllers write the object too: a conflict is retried on the
// latest version.
func setMinSize(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, name string, minSize int) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		md := get(ctx, t, dyn, ns, capi.MachineDeployment, name)
		ann := md.GetAnnotations()
		ann[capi.MinSizeAnnotation] = strconv.Itoa(minSize)
		md.SetAnnotations(ann)
		_, err := dyn.Resource(cpclusterapi.GVR(capi.MachineDeployment)).Namespace(ns).Update(ctx, md, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
