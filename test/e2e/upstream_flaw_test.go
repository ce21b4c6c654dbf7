package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The KEP's migration path on the stock plugins: class B (newer) takes
// over the name, then the name is cleared from class A. Upstream's cache
// drops the name altogether, so the pod stays pending; draxr-scheduler
// (TestMigrationPath) keeps scheduling onto B's devices.
func TestStockSchedulerLosesMappingOnMigration(t *testing.T) {
	e := newEnv(t, "stock")
	opts := schedulerOptions("")
	opts.Config = filepath.Join(root, "scheduler/deploy/stock-scheduler-config.yaml")
	opts.Name = "stock-scheduler"
	stop, err := cp.StartScheduler(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	oldDriver, newDriver := "old.stock.example.com", "new.stock.example.com"
	a := e.class("stock-a", oldDriver, e.resource)
	e.draNode("stock-old", oldDriver, 1)
	e.draNode("stock-new", newDriver, 2)
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has second granularity
	e.class("stock-b", newDriver, e.resource)
	a, err = cp.Client.ResourceV1().DeviceClasses().Get(e.ctx, a.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.ExtendedResourceName = nil
	if _, err := cp.Client.ResourceV1().DeviceClasses().Update(e.ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: e.ns},
		Spec: v1.PodSpec{SchedulerName: "stock-scheduler", NodeSelector: map[string]string{"e2e-test": e.name},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{e.resource: *resourceQuantity(1)}}}}},
	}
	if _, err := cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := e.waitUnschedulable("after")
	msg := conditions(got)
	if !strings.Contains(msg, "Insufficient "+string(e.resource)) {
		t.Errorf("stock scheduler: %s; want Insufficient %s (the name lost its class)", msg, e.resource)
	}
}
