package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
)

// setArg matches a --set argument in docs/install.md, quoted or not.
var setArg = regexp.MustCompile(`--set '([^']+)'|--set ([^\s\x60\\]+)`)

// docs/install.md's helm install --set arguments, parsed as helm parses them,
// render the clusterapi provider with the auto-discovery spec they mean;
// the escaped-comma example stays one spec.
func TestReadmeSetExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "helm install draxr charts/draxr")
	if start < 0 {
		t.Fatal("docs/install.md has no helm install example")
	}
	block := text[start:]
	block = block[:strings.Index(block, "\n- ")]
	install, escaped := map[string]any{}, map[string]any{}
	for _, m := range setArg.FindAllStringSubmatch(block, -1) {
		arg := m[1] + m[2]
		into := install
		if strings.Contains(arg, `\,`) {
			into = escaped
		}
		if err := strvals.ParseInto(arg, into); err != nil {
			t.Fatalf("helm cannot parse --set %s: %v", arg, err)
		}
	}
	check := func(values map[string]any, want string) {
		t.Helper()
		_, args := container(t, mustFind(t, render(t, values), "Deployment", "draxr-autoscaler"))
		if !slices.Contains(args, "--cloud-provider=clusterapi") || !slices.Contains(args, want) {
			t.Errorf("docs/install.md's --set values %v render %v, want --cloud-provider=clusterapi and %s", values, args, want)
		}
	}
	check(install, "--node-group-auto-discovery=clusterapi:clusterName=prod,namespace=default")
	if len(escaped) == 0 {
		t.Fatal("docs/install.md has no escaped-comma --set example")
	}
	check(escaped, "--node-group-auto-discovery=clusterapi:namespace=default,clusterName=prod")
}
