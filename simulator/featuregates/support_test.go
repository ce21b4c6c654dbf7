package featuregates

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

// draGate says whether a gate is of the DRA family.
func draGate(name string) bool {
	switch name {
	case "DynamicResourceAllocation", "KubeletPodResourcesDynamicResources", "ResourceHealthStatus", "ResourceHealthStatusMessage":
		return true
	}
	return strings.HasPrefix(name, "DRA")
}

// docs/dra-support.md has a row for every DRA gate of the build, with the
// build's stage and default; every test and fidelity shape it cites
// exists; every refused gate is refused by Apply with the quoted message.
func TestDRASupportTable(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "dra-support.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[strings.Trim(cells[0], "`")] = cells
	}
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if !draGate(string(name)) {
			continue
		}
		row, ok := rows[string(name)]
		if !ok {
			t.Errorf("docs/dra-support.md has no row for the DRA gate %s (%s, default %v)", name, stage(spec), spec.Default)
			continue
		}
		want := "off"
		if spec.Default {
			want = "on"
		}
		if spec.LockToDefault {
			want += " (locked)"
		}
		if row[2] != stage(spec) || row[3] != want {
			t.Errorf("%s: the table says %s, %s; the build %s, %s", name, row[2], row[3], stage(spec), want)
		}
		if strings.Contains(row[4], "**refused**") {
			msg := regexp.MustCompile(`"([^"]+)"`).FindStringSubmatch(row[4])
			err := Apply(map[string]bool{string(name): true})
			if err == nil || msg == nil || !strings.Contains(err.Error(), msg[1]) {
				t.Errorf("%s: refused in the table with %v; Apply says %v", name, msg, err)
			}
		}
	}
	tests := map[string]bool{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			data, _ := os.ReadFile(path)
			for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(`).FindAllStringSubmatch(string(data), -1) {
				tests[m[1]] = true
			}
		}
		return nil
	})
	for _, m := range regexp.MustCompile("`(Test\\w+)`").FindAllStringSubmatch(string(doc), -1) {
		if !tests[m[1]] {
			t.Errorf("docs/dra-support.md cites %s, which is no test", m[1])
		}
	}
	for _, m := range regexp.MustCompile("`fidelity:([a-z0-9-]+)`").FindAllStringSubmatch(string(doc), -1) {
		if _, err := os.Stat(filepath.Join(root, "test", "e2e", "testdata", "fidelity", m[1])); err != nil {
			t.Errorf("docs/dra-support.md cites fidelity shape %s: %v", m[1], err)
		}
	}
}

func stage(spec featuregate.FeatureSpec) string {
	switch spec.PreRelease {
	case featuregate.GA:
		return "GA"
	case featuregate.Beta:
		return "beta"
	case featuregate.Alpha:
		return "alpha"
	}
	return strings.ToLower(string(spec.PreRelease))
}
