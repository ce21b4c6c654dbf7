// Package kwok runs draxr-autoscaler --cloud-provider=kwok on a real
// control plane with draxr-scheduler and the kwok controller (linked in
// this process, test/kwok): fake nodes that are API objects, made Ready
// and running their pods by kwok, with the group's ResourceSlices.
package kwok

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	testkwok "draxr.dev/draxr/test/kwok"
)

var cluster *testkwok.Cluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return 0 // needs a control plane: make test-unit leaves it out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	cluster, err = testkwok.StartCluster(ctx, testkwok.ClusterOptions{
		Kwok: testkwok.Options{LeaseDuration: 40 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kwok e2e: start cluster:", err)
		return 1
	}
	defer cluster.Stop()
	code := m.Run()
	if code != 0 {
		path := filepath.Join(os.TempDir(), "draxr-kwok-e2e-controlplane.log")
		if err := os.WriteFile(path, []byte(cluster.CP.Logs()), 0o644); err == nil {
			fmt.Fprintln(os.Stderr, "kwok e2e: control plane logs in", path)
		}
	}
	return code
}
