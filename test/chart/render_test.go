package chart

import (
	"os"
	"path/filepath"
	"testing"
)

// A quick look at what the chart renders, for people: go test -run
// TestPrintDefault -v ./test/chart/ with DRAXR_PRINT_CHART=1.
func TestPrintDefault(t *testing.T) {
	if os.Getenv("DRAXR_PRINT_CHART") == "" {
		t.Skip("set DRAXR_PRINT_CHART=1")
	}
	docs, err := Render(filepath.Join("..", "..", "charts", "draxr"), "draxr", "kube-system", PlainValues())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		t.Logf("# %s\n%s", d.Template, d.Text)
	}
}
