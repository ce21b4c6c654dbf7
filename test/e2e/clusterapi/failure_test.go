package clusterapi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	"draxr.dev/draxr/test/clusterapi/infra"
)

// statusConfigMap is the name autoscaler/deploy/rbac.yaml (the chart)
// lets the autoscaler write; the tests' autoscalers run one at a time.
func statusConfigMap(string) string { return core.DefaultStatusConfigMapName }

// gpuSlices are one slice of n devices of driver.
func gpuSlices(driver string, n int) []resourceapi.ResourceSliceSpec {
	spec := resourceapi.ResourceSliceSpec{Driver: driver}
	for i := range n {
		spec.Devices = append(spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return []resourceapi.ResourceSliceSpec{spec}
}

// createClass makes a DeviceClass of all devices of driver; extended
// names it also answers to (besides the implicit one), if not "".
func createClass(ctx context.Context, t *testing.T, name, driver, extended string) {
	t.Helper()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}},
	}}
	if extended != "" {
		class.Spec.ExtendedResourceName = ptr.To(extended)
	}
	if _, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gpuGroup creates the infrastructure template and the MachineDeployment
// or MachineSet of a group whose nodes have 8 devices of driver.
func gpuGroup(ctx context.Context, t *testing.T, dyn dynamic.Interface, kind, ns, name, driver string, neverProvision bool) {
	t.Helper()
	tmpl, err := infra.Template(ns, name, gpuSlices(driver, 8), "8", neverProvision)
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, tmpl)
	slicesJSON, err := yaml.Marshal(gpuSlices(driver, 8))
	if err != nil {
		t.Fatal(err)
	}
	create(ctx, t, dyn, scalableResource(kind, ns, name, map[string]string{
		capi.MinSizeAnnotation: "0", capi.MaxSizeAnnotation: "5",
		capi.CPUAnnotation: "8", capi.MemoryAnnotation: "32Gi",
		capi.TemplateSlicesAnnotation: string(slicesJSON),
	}))
}

// createPods runs n pods that each ask for one of resource.
func createPods(ctx context.Context, t *testing.T, ns, name string, n int32, res v1.ResourceName) {
	t.Helper()
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/train",
					Resources: v1.ResourceRequirements{Limits: v1.ResourceList{res: resource.MustParse("1")}}}},
			}}},
	}
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitBound(ctx context.Context, t *testing.T, ns string, want int) {
	t.Helper()
	eventually(ctx, t, 3*time.Minute, fmt.Sprintf("%d pods bound", want), func() error {
		bound, err := boundPods(ctx, ns)
		if err != nil {
			return err
		}
		if bound != want {
			return fmt.Errorf("%d of %d bound", bound, want)
		}
		return nil
	})
	podsBound.Add(int64(want))
}

// An InfraMachine that never provisions: after --max-node-provision-time
// the group is backed off (ScaleUpTimedOut, Backoff in the status), its
// machine is given up, and the second MachineDeployment takes the pods.
func TestProvisionTimeoutFallsBack(t *testing.T) {
	const ns, driver = "capi-timeout", "timeout.example.com"
	const res = v1.ResourceName("example.com/timeout-gpu")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	setupCluster(ctx, t, dyn, ns)
	createClass(ctx, t, driver, driver, string(res))
	gpuGroup(ctx, t, dyn, capi.MachineDeployment, ns, "stuck", driver, true)
	gpuGroup(ctx, t, dyn, capi.MachineDeployment, ns, "fallback", driver, false)
	// The priority expander tries the stuck group first, every time it may.
	priorities := filepath.Join(t.TempDir(), "priorities.yaml")
	if err := os.WriteFile(priorities, []byte("20:\n- .*/stuck$\n10:\n- .*/fallback$\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startAutoscaler(t, ns, "--expander=priority", "--expander-priorities="+priorities, "--max-node-provision-time=15s")
	createPods(ctx, t, ns, "train", 4, res)

	stuckID := capi.MachineDeployment + "/" + ns + "/stuck"
	eventually(ctx, t, 2*time.Minute, "the stuck group asked for a machine", func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "stuck"); got != 1 {
			return fmt.Errorf("stuck replicas = %d", got)
		}
		return nil
	})
	machinesCreated.Add(1)
	waitBound(ctx, t, ns, 4)
	if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "fallback"); got != 1 {
		t.Errorf("fallback replicas = %d, want 1 (one 8-GPU node for 4 pods)", got)
	}
	machinesCreated.Add(1)
	eventually(ctx, t, time.Minute, "the stuck machine given up", func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineDeployment, "stuck"); got != 0 {
			return fmt.Errorf("stuck replicas = %d", got)
		}
		for _, m := range machineNames(ctx, t, dyn, ns) {
			if strings.HasPrefix(m, "stuck-") {
				return fmt.Errorf("machine %s still there", m)
			}
		}
		return nil
	})
	machinesRemoved.Add(1)

	events, err := cp.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"reason": "ScaleUpTimedOut", "involvedObject.name": statusConfigMap(ns)}.AsSelector().String()})
	if err != nil {
		t.Fatal(err)
	}
	timedOut := false
	for _, e := range events.Items {
		timedOut = timedOut || strings.Contains(e.Message, stuckID)
	}
	if !timedOut {
		t.Errorf("ScaleUpTimedOut events = %v, want one naming %s", events.Items, stuckID)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, statusConfigMap(ns), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var status core.ClusterAutoscalerStatus
	if err := yaml.UnmarshalStrict([]byte(cm.Data[core.StatusKey]), &status); err != nil {
		t.Fatalf("status does not parse with CA's schema: %v", err)
	}
	backedOff := false
	for _, g := range status.NodeGroups {
		backedOff = backedOff || (g.Name == stuckID && g.ScaleUp.Status == core.StatusBackoff)
	}
	if !backedOff {
		t.Errorf("status ConfigMap does not show %s in Backoff:\n%s", stuckID, cm.Data[core.StatusKey])
	}
}

// Scale from zero with a MachineSet that no MachineDeployment owns, for
// pods asking for the DeviceClass's implicit extended resource name.
func TestScaleFromZeroMachineSetImplicitName(t *testing.T) {
	const ns, driver, class = "capi-machineset", "ms.example.com", "ms-gpu"
	res := v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + class)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	setupCluster(ctx, t, dyn, ns)
	createClass(ctx, t, class, driver, "")
	gpuGroup(ctx, t, dyn, capi.MachineSet, ns, "gpu", driver, false)
	startAutoscaler(t, ns)
	createPods(ctx, t, ns, "train", 10, res)

	waitBound(ctx, t, ns, 10)
	if got := replicas(ctx, t, dyn, ns, capi.MachineSet, "gpu"); got != 2 {
		t.Fatalf("MachineSet replicas = %d, want 2 (10 pods, 8 GPUs a node)", got)
	}
	machines := machineNames(ctx, t, dyn, ns)
	machinesCreated.Add(int64(len(machines)))
	if len(machines) != 2 {
		t.Fatalf("machines = %v, want 2", machines)
	}
	consistently(t, 3500*time.Millisecond, "replicas stay 2", func() error {
		if got := replicas(ctx, t, dyn, ns, capi.MachineSet, "gpu"); got != 2 {
			return fmt.Errorf("replicas = %d", got)
		}
		return nil
	})
}
