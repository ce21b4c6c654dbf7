package kueue

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// The manager's configuration is YAML a person can read in the state
// folder; with mappings it turns on the gate that reads them, and keeps
// the gates the tests rely on.
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		gates map[string]any
		maps  any
	}{
		{name: "plain", gates: map[string]any{"VisibilityOnDemand": false}},
		{name: "device class mappings",
			opts: Options{DeviceClassMappings: []DeviceClassMapping{
				{Name: "example.com/gpu", DeviceClassNames: []string{"gpu.example.com", "gpu-b.example.com"}},
				{Name: "nic", DeviceClassNames: []string{"nic.example.com"}}}},
			gates: map[string]any{"VisibilityOnDemand": false, "DynamicResourceAllocation": true},
			maps: []any{
				map[string]any{"name": "example.com/gpu", "deviceClassNames": []any{"gpu.example.com", "gpu-b.example.com"}},
				map[string]any{"name": "nic", "deviceClassNames": []any{"nic.example.com"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.opts.config(1, 2, 3, "/certs")
			var c map[string]any
			if err := yaml.Unmarshal(data, &c); err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if !reflect.DeepEqual(c["featureGates"], tc.gates) {
				t.Errorf("featureGates = %v, want %v\n%s", c["featureGates"], tc.gates, data)
			}
			var maps any
			if r, ok := c["resources"].(map[string]any); ok {
				maps = r["deviceClassMappings"]
			}
			if !reflect.DeepEqual(maps, tc.maps) {
				t.Errorf("resources.deviceClassMappings = %v, want %v\n%s", maps, tc.maps, data)
			}
			if c["webhook"].(map[string]any)["certDir"] != "/certs" {
				t.Errorf("webhook = %v", c["webhook"])
			}
		})
	}
}
