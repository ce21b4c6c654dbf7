package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	e.classNewerThan(a, "stock-b", newDriver, e.resource)
	a, err = cp.Client.ResourceV1().DeviceClasses().Get(e.ctx, a.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.ExtendedResourceName = nil
	if _, err := cp.Client.ResourceV1().DeviceClasses().Update(e.ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitClassesSeen("stock-scheduler")
	e.podFor("stock-scheduler", "after", e.resource, 1)
	got := e.waitUnschedulable("after")
	msg := conditions(got)
	if !strings.Contains(msg, "Insufficient "+string(e.resource)) {
		t.Errorf("stock scheduler: %s; want Insufficient %s (the name lost its class)", msg, e.resource)
	}
}
