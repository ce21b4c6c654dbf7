package nodegroup

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNodeNamePrefixes(t *testing.T) {
	groups := []string{"gpu", "MachineDeployment/default/prod-l4", "MachineSet/a/gpu-x", "MachinePool/b/gpu-x",
		"MachineDeployment/ns/Big_Pool.v2", "MachineDeployment/ns/" + strings.Repeat("long", 30), "MachineSet/ns/..."}
	got := NodeNamePrefixes(groups)
	if got["gpu"] != "gpu" || got["MachineDeployment/default/prod-l4"] != "prod-l4" || got["MachineDeployment/ns/Big_Pool.v2"] != "big-pool-v2" {
		t.Errorf("prefixes = %v", got)
	}
	if got["MachineSet/a/gpu-x"] == got["MachinePool/b/gpu-x"] || !strings.HasPrefix(got["MachineSet/a/gpu-x"], "gpu-x-") {
		t.Errorf("two groups named gpu-x share or lose their prefix: %q %q", got["MachineSet/a/gpu-x"], got["MachinePool/b/gpu-x"])
	}
	for g, p := range got {
		for _, name := range []string{p + "-new-99999", p + "-upcoming-99999"} {
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Errorf("group %s: node name %q: %v", g, name, errs)
			}
		}
	}
}
