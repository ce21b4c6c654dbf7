package core

import (
	"os"
	"testing"

	"draxr.dev/draxr/autoscaler/metrics"
)

// TestMain registers the metric set once, as the process does (app.Run):
// the tests that scrape /metrics read what the loops updated.
func TestMain(m *testing.M) {
	metrics.Register(false)
	os.Exit(m.Run())
}
