package e2e

import (
	"path/filepath"
	"strings"
	"testing"
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
	e.clearExtendedResourceName(a.Name)
	e.waitClassesSeen("stock-scheduler")
	e.podFor("stock-scheduler", "after", e.resource, 1)
	got := e.waitUnschedulable("after")
	msg := conditions(got)
	if !strings.Contains(msg, "Insufficient "+string(e.resource)) {
		t.Errorf("stock scheduler: %s; want Insufficient %s (the name lost its class)", msg, e.resource)
	}
}
