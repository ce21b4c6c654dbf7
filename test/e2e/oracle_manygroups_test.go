package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fx "draxr.dev/draxr/simulator/fixtures"
	"draxr.dev/draxr/simulator/nodegroup"
)

// manyGroupsScenario writes Karpenter's benchmark shape (issue 56,
// BenchmarkManyGroups) as a scenario folder: its 400 instance types as
// NodeGroups, each in one of three zones, and n pending pods of the five
// kinds (plain, zone and host spread, zone affinity, host anti-affinity).
func manyGroupsScenario(t *testing.T, n int) string {
	t.Helper()
	var docs []string
	add := func(obj any) {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	zones := fx.InstanceTypeZones()
	for i := range 400 {
		tmpl := fx.InstanceTypeNode(i, zones[i%len(zones)])
		tmpl.Name, tmpl.UID, tmpl.Status.Conditions = "", "", nil
		delete(tmpl.Labels, v1.LabelHostname)
		add(nodegroup.NodeGroup{TypeMeta: metav1.TypeMeta{APIVersion: nodegroup.APIVersion, Kind: nodegroup.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fake-it-%d", i)},
			Spec:       nodegroup.Spec{MaxSize: 1000, Template: *tmpl}})
	}
	for _, p := range fx.FiveKinds(n) {
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		add(p)
	}
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("many-groups-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
