package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// The chart installs CA's ProvisioningRequest CRD as the module of CA's
// API types (go.mod's version) carries it, byte for byte: a cluster that
// has CA's CRD already keeps it (Helm leaves existing CRDs alone), and
// one that gets the chart's has CA's.
func TestProvisioningRequestCRDIsCAs(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/autoscaler/cluster-autoscaler/apis").Output()
	if err != nil {
		t.Fatalf("go list the CA apis module: %v", err)
	}
	const name = "autoscaling.x-k8s.io_provisioningrequests.yaml"
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", name))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "charts", "draxr", "crds", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("charts/draxr/crds/%s differs from the CA apis module's config/crd/%s: copy it again", name, name)
	}
	ch, err := loader.Load(filepath.Join(root, "charts", "draxr"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, c := range ch.CRDObjects() {
		files = append(files, filepath.Base(c.Filename))
	}
	if want := []string{"autoscaling.x-k8s.io_capacitybuffers.yaml", name}; strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("the chart's CRDs %v, want CA's %v", files, want)
	}
}
