package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	fx "draxr.dev/draxr/simulator/fixtures"
)

// env is one test's slice of the shared cluster: its own namespace,
// driver, resource name and node label, so tests cannot take each other's
// nodes or devices.
type env struct {
	t        *testing.T
	ctx      context.Context
	name     string // short, DNS-safe
	ns       string
	driver   string
	resource v1.ResourceName
}

func newEnv(t *testing.T, name string) *env {
	t.Helper()
	return newEnvWithin(t, name, 3*time.Minute)
}

// newEnvWithin is newEnv for a test that may take up to timeout in all.
func newEnvWithin(t *testing.T, name string, timeout time.Duration) *env {
	t.Helper()
	skipUnderShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, name: name, ns: "e2e-" + name,
		driver: name + ".example.com", resource: v1.ResourceName(name + ".example.com/gpu")}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount, made by the controller-manager.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("namespace %s: no default ServiceAccount: %v", e.ns, err)
	}
	return e
}

// class creates a DeviceClass selecting the env's driver (or another),
// mapping the explicit name when given.
func (e *env) class(name, driver string, explicit v1.ResourceName) *resourceapi.DeviceClass {
	e.t.Helper()
	c := fx.Class(name, driver, explicit, time.Time{})
	c.UID, c.CreationTimestamp = "", metav1.Time{}
	created, err := cp.Client.ResourceV1().DeviceClasses().Create(e.ctx, c, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// draNode adds a Ready node whose driver publishes devices GPUs.
func (e *env) draNode(name, driver string, devices int) {
	e.t.Helper()
	n := fx.Node(name, 32, 128, nil)
	n.UID = ""
	n.Labels["e2e-test"] = e.name
	if _, err := cp.AddReadyNode(e.ctx, n); err != nil {
		e.t.Fatal(err)
	}
	if devices == 0 {
		return
	}
	s := fx.DeviceSlice(name, driver, devices, "gpu")
	if _, err := cp.Client.ResourceV1().ResourceSlices().Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// devicePluginNode adds a Ready node advertising n of the env's resource
// in allocatable, as a device plugin would.
func (e *env) devicePluginNode(name string, n int64) {
	e.t.Helper()
	node := fx.Node(name, 32, 128, fx.GPUs(e.resource, n))
	node.UID = ""
	node.Labels["e2e-test"] = e.name
	if _, err := cp.AddReadyNode(e.ctx, node); err != nil {
		e.t.Fatal(err)
	}
}

// classNewerThan creates a DeviceClass whose creationTimestamp is later
// than older's, for the KEP's "newest class wins". Timestamps have second
// granularity, so it first waits until this host's clock (the API
// server's: it listens on 127.0.0.1) has passed older's second.
func (e *env) classNewerThan(older *resourceapi.DeviceClass, name, driver string, explicit v1.ResourceName) *resourceapi.DeviceClass {
	e.t.Helper()
	next := older.CreationTimestamp.Add(time.Second)
	if err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !time.Now().Before(next), nil
	}); err != nil {
		e.t.Fatalf("clock did not pass %v: %v", next, err)
	}
	c := e.class(name, driver, explicit)
	if !older.CreationTimestamp.Before(&c.CreationTimestamp) {
		e.t.Fatalf("DeviceClass %s created at %v, not after %s (%v)", c.Name, c.CreationTimestamp, older.Name, older.CreationTimestamp)
	}
	return c
}

// clearExtendedResourceName removes the explicit name from a DeviceClass,
// the KEP's last migration step.
func (e *env) clearExtendedResourceName(class string) {
	e.t.Helper()
	c, err := cp.Client.ResourceV1().DeviceClasses().Get(e.ctx, class, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	c.Spec.ExtendedResourceName = nil
	if _, err := cp.Client.ResourceV1().DeviceClasses().Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitClassesSeen returns once the scheduler (profile schedulerName, ""
// for the default) has observed every DeviceClass change made so far.
// A scheduler receives DeviceClass events in order, so when a pod that
// only a new sentinel class can serve is bound, the earlier class changes
// are in its view too (NodeResourcesFit requeues the pod on the class's
// arrival if the pod came first).
func (e *env) waitClassesSeen(schedulerName string) {
	e.t.Helper()
	name := e.name + "-sentinel"
	driver := "sentinel." + e.driver
	resource := v1.ResourceName(e.name + ".example.com/sentinel")
	e.class(name, driver, resource)
	e.draNode(name, driver, 1)
	e.podFor(schedulerName, name, resource, 1)
	e.waitBound(name)
}

// pod creates a pod asking for count of resource in limits only, as users
// write it, restricted to the env's nodes.
func (e *env) pod(name string, resource v1.ResourceName, count int64) *v1.Pod {
	e.t.Helper()
	return e.podFor("", name, resource, count)
}

// podFor is pod for the scheduler profile schedulerName ("" for the
// default scheduler).
func (e *env) podFor(schedulerName, name string, resource v1.ResourceName, count int64) *v1.Pod {
	e.t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1.PodSpec{
			SchedulerName:                 schedulerName,
			NodeSelector:                  map[string]string{"e2e-test": e.name},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{resource: fx.Count(count)}}}},
		},
	}
	created, err := cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// waitPod polls the pod until done says so, for at most timeout, and
// returns it; the pod as last seen (nil: never found) and the error go to
// fail otherwise.
func (e *env) waitPod(name string, timeout time.Duration, done func(*v1.Pod) bool, fail func(last *v1.Pod, err error)) *v1.Pod {
	e.t.Helper()
	var pod *v1.Pod
	if err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return done(p), nil
	}); err != nil {
		fail(pod, err)
	}
	return pod
}

// waitBound waits until the pod is bound and its status written, and
// returns it.
func (e *env) waitBound(name string) *v1.Pod {
	e.t.Helper()
	return e.waitPod(name, 90*time.Second, func(p *v1.Pod) bool { return p.Spec.NodeName != "" }, func(last *v1.Pod, err error) {
		e.t.Fatalf("pod %s/%s not bound: %v; conditions: %v", e.ns, name, err, conditions(last))
	})
}

// waitUnschedulable waits until the scheduler reports the pod unschedulable.
func (e *env) waitUnschedulable(name string) *v1.Pod {
	e.t.Helper()
	return e.waitPod(name, 60*time.Second, func(p *v1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	}, func(last *v1.Pod, err error) {
		node := "pod not found"
		if last != nil {
			node = last.Spec.NodeName
		}
		e.t.Fatalf("pod %s/%s not reported unschedulable: %v (node %q)", e.ns, name, err, node)
	})
}

func conditions(p *v1.Pod) string {
	if p == nil {
		return "pod not found"
	}
	var parts []string
	for _, c := range p.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// claimOf returns the pod's extended-resource claim from its status.
func (e *env) claimOf(pod *v1.Pod) *resourceapi.ResourceClaim {
	e.t.Helper()
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		e.t.Fatalf("pod %s has no extendedResourceClaimStatus", pod.Name)
	}
	c, err := cp.Client.ResourceV1().ResourceClaims(e.ns).Get(e.ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// waitExtendedStatus waits for the scheduler's PreBind status patch to be
// visible.
func (e *env) waitExtendedStatus(name string) *v1.Pod {
	e.t.Helper()
	return e.waitPod(name, 30*time.Second, func(p *v1.Pod) bool {
		return p.Spec.NodeName != "" && p.Status.ExtendedResourceClaimStatus != nil
	}, func(_ *v1.Pod, err error) {
		e.t.Fatalf("pod %s: no extendedResourceClaimStatus: %v", name, err)
	})
}

func (e *env) deletePod(name string) {
	e.t.Helper()
	if err := cp.Client.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		e.t.Fatal(err)
	}
}

// devices lists "pool/device" of an allocated claim.
func devices(c *resourceapi.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return out
}

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

func resourcePool() resourceapi.ResourcePool { return resourceapi.ResourcePool{} }

// deleteOnCleanup deletes the env's objects of each resource when the test
// ends (before its context is cancelled), so that later tests reading the
// whole cluster (the CLI's live simulate) do not see this test's batch
// objects. A resource whose CRD is not installed is skipped.
func (e *env) deleteOnCleanup(resources ...schema.GroupVersionResource) {
	e.t.Helper()
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, gvr := range resources {
			err := dyn.Resource(gvr).Namespace(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				e.t.Errorf("deleting the test's %s: %v", gvr.Resource, err)
			}
		}
	})
}
