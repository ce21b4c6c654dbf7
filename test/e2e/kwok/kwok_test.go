package kwok

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/cloudprovider/kwok"
	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup/capi"
	testkwok "draxr.dev/draxr/test/kwok"
)

func namespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	c := cluster.CP.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount.
	if err := testkwok.WaitFor(ctx, time.Minute, 100*time.Millisecond, "default ServiceAccount", func() error {
		_, err := c.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *v1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// The kwok controller plays the kubelet: a node marked kwok.x-k8s.io/node:
// fake turns Ready (and the node lifecycle controller lifts the not-ready
// taint), a pod bound to it runs, and a deleted pod goes.
func TestKwokRunsFakeNodesAndPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := cluster.CP.Client
	namespace(ctx, t, "kwok-basic")
	node := fx.Node("kwok-basic-0", 8, 32, nil)
	node.UID, node.Status.Conditions = "", nil
	node.Annotations = map[string]string{kwok.FakeNodeAnnotation: kwok.FakeNodeValue}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) }()
	if err := testkwok.WaitFor(ctx, time.Minute, 200*time.Millisecond, "node Ready and untainted", func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case !ready(n):
			return fmt.Errorf("conditions %v", n.Status.Conditions)
		case hasTaint(n, v1.TaintNodeNotReady):
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pod := fx.Pod("p", 100, nil)
	pod.Namespace, pod.Spec.NodeName, pod.UID = "kwok-basic", node.Name, ""
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testkwok.WaitFor(ctx, time.Minute, 200*time.Millisecond, "pod Running", func() error {
		p, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A graceful delete: only the kubelet's part (kwok's pod-delete stage)
	// ends it.
	if err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	if err := testkwok.WaitFor(ctx, 20*time.Second, 200*time.Millisecond, "pod gone", func() error {
		if _, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

const groupLabel = "node.kubernetes.io/instance-type"

// gpuTemplate is a template node of group name as a user writes it in
// kwok-provider-templates: the group label, sizes, and the DRA devices
// (driver's, devices of them) its driver publishes.
func gpuTemplate(t *testing.T, name, driver string, minSize, maxSize, devices int) *v1.Node {
	t.Helper()
	n := fx.Node(name+"-template", 32, 128, nil)
	n.UID, n.Status.Conditions = "", nil
	n.Labels = map[string]string{groupLabel: name}
	spec := fx.DeviceSlice("x", driver, devices, "gpu").Spec
	spec.NodeName, spec.Pool = nil, resourceapi.ResourcePool{}
	b, err := yaml.Marshal([]resourceapi.ResourceSliceSpec{spec})
	if err != nil {
		t.Fatal(err)
	}
	n.Annotations = map[string]string{
		kwok.MinSizeAnnotation: fmt.Sprint(minSize), kwok.MaxSizeAnnotation: fmt.Sprint(maxSize),
		capi.TemplateSlicesAnnotation: string(b),
	}
	return n
}

func groupNodes(ctx context.Context, t *testing.T, group string) []v1.Node {
	t.Helper()
	list, err := cluster.CP.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: groupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// draxr-autoscaler --cloud-provider=kwok grows a DRA group from 0 for
// pending one-GPU pods: kwok nodes with the group's slices, which
// draxr-scheduler binds the pods to and kwok runs; with the pods gone the
// group shrinks back to its min, slices and all.
func TestAutoscalerKwokScaleUpAndDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := cluster.CP.Client
	const ns, driver, resource = "kwok-scale", "kwokscale.example.com", "kwokscale.example.com/gpu"
	namespace(ctx, t, ns)
	class := fx.Class("kwokscale-gpu", driver, resource, time.Time{})
	class.UID, class.CreationTimestamp = "", metav1.Time{}
	if _, err := c.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := "apiVersion: v1alpha1\nreadNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: " + groupLabel +
		"\nnodes:\n  skipTaint: true\nconfigmap:\n  name: " + kwok.DefaultTemplatesName + "\n"
	if err := cluster.Configure(ctx, "kube-system", config, gpuTemplate(t, "kwokscale", driver, 0, 10, 4)); err != nil {
		t.Fatal(err)
	}
	p, _, err := cluster.StartAutoscaler(ctx, "draxr-autoscaler-kwokscale", "--scan-interval=1s",
		"--scale-down-unneeded-time=5s", "--scale-down-delay-after-add=0s")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("autoscaler log:\n%s", p.LogTail(8000))
		}
		p.Stop(10 * time.Second)
	}()

	labels := map[string]string{"app": "train"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](10), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{
				NodeSelector:                  map[string]string{groupLabel: "kwokscale"},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
					Resources: v1.ResourceRequirements{Limits: v1.ResourceList{resource: fx.Count(1)}}}},
			}}},
	}
	start := time.Now()
	if _, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testkwok.WaitFor(ctx, 4*time.Minute, 500*time.Millisecond, "10 pods Running", func() error {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == v1.PodRunning && p.Spec.NodeName != "" {
				running++
			}
		}
		if running != 10 {
			return fmt.Errorf("%d of %d pods running", running, len(pods.Items))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("10 one-GPU pods: created to all running on kwok nodes in %.1f s", time.Since(start).Seconds())
	nodes := groupNodes(ctx, t, "kwokscale")
	if len(nodes) != 3 {
		t.Fatalf("group has %d nodes, want 3 (10 pods, 4 GPUs a node)", len(nodes))
	}
	for _, n := range nodes {
		if n.Annotations[kwok.FakeNodeAnnotation] != kwok.FakeNodeValue || !strings.HasPrefix(n.Spec.ProviderID, kwok.ProviderIDPrefix) || !ready(&n) {
			t.Errorf("node %s: annotations %v providerID %q ready %v", n.Name, n.Annotations, n.Spec.ProviderID, ready(&n))
		}
		slices, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + n.Name})
		if err != nil || len(slices.Items) != 1 || len(slices.Items[0].Spec.Devices) != 4 {
			t.Errorf("node %s slices: %v (%v), want one with 4 devices", n.Name, slices, err)
		}
	}

	rs, err = c.AppsV1().ReplicaSets(ns).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Spec.Replicas = ptr.To[int32](0)
	if _, err := c.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	if err := testkwok.WaitFor(ctx, 3*time.Minute, time.Second, "group back to min 0", func() error {
		if n := len(groupNodes(ctx, t, "kwokscale")); n != 0 {
			return fmt.Errorf("%d nodes", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 empty kwok nodes removed in %.1f s", time.Since(down).Seconds())
	for _, n := range nodes {
		slices, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + n.Name})
		if err != nil || len(slices.Items) != 0 {
			t.Errorf("removed node %s still has slices: %v (%v)", n.Name, slices, err)
		}
	}
}
