package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// values.schema.json refuses unknown keys and wrong types at render time
// (helm install, helm template and Render validate against it), naming
// the value.
func TestSchemaRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"unknown top-level":  {map[string]any{"autoscalr": map[string]any{}}, "additional properties 'autoscalr' not allowed"},
		"unknown nested":     {map[string]any{"autoscaler": map[string]any{"cloudprovider": "clusterapi"}}, "at '/autoscaler': additional properties 'cloudprovider' not allowed"},
		"unknown deeper":     {map[string]any{"autoscaler": map[string]any{"clusterAPI": map[string]any{"clusterName": "prod"}}}, "at '/autoscaler/clusterAPI': additional properties 'clusterName' not allowed"},
		"CA autoDiscovery":   {map[string]any{"autoDiscovery": map[string]any{"tags": []any{"x"}}}, "at '/autoDiscovery': additional properties 'tags' not allowed"},
		"wrong type":         {map[string]any{"scheduler": map[string]any{"enabled": "yes"}}, "at '/scheduler/enabled': got string, want boolean"},
		"replicas":           {map[string]any{"autoscaler": map[string]any{"replicas": -1}}, "at '/autoscaler/replicas'"},
		"scoring weight":     {map[string]any{"scheduler": map[string]any{"scoring": map[string]any{"resources": []any{map[string]any{"name": "cpu", "weight": 0}}}}}, "at '/scheduler/scoring/resources/0/weight'"},
		"discovery spec":     {map[string]any{"autoscaler": map[string]any{"clusterAPI": map[string]any{"autoDiscovery": []any{"namespace=x"}}}}, "at '/autoscaler/clusterAPI/autoDiscovery/0'"},
		"CA provider":        {map[string]any{"cloudProvider": "aws"}, "at '/cloudProvider': value must be one of '', 'local', 'kwok', 'clusterapi'"},
		"CA mode":            {map[string]any{"clusterAPIMode": "incluster"}, "at '/clusterAPIMode': value must be one of"},
		"CA name, draxr's":   {map[string]any{"replicaCount": 2}, "replicaCount is the Cluster Autoscaler chart's value; draxr's chart reads autoscaler.replicas"},
		"CA extraArgs":       {map[string]any{"extraArgs": map[string]any{"v": 4}}, "extraArgs is the Cluster Autoscaler chart's value; draxr's chart reads autoscaler.extraArgs"},
		"CA image key":       {map[string]any{"image": map[string]any{"repository": "x"}}, "at '/image': additional properties 'repository' not allowed"},
		"pull policy":        {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"},
		"extraArgs of a map": {map[string]any{"autoscaler": map[string]any{"extraArgs": map[string]any{"x": map[string]any{}}}}, "at '/autoscaler/extraArgs/x'"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Dir(root), "draxr", "kube-system", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The case: CA's values for Cluster API are not ignored: they
// make the clusterapi provider with CA's discovery spec.
func TestSchemaCAValuesTakeEffect(t *testing.T) {
	_, args := container(t, mustFind(t, render(t, map[string]any{"cloudProvider": "clusterapi",
		"autoDiscovery": map[string]any{"clusterName": "prod"}}), "Deployment", "draxr-autoscaler"))
	for _, w := range []string{"--cloud-provider=clusterapi", "--node-group-auto-discovery=clusterapi:clusterName=prod"} {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %s: %v", w, args)
		}
	}
}

// Every object the schema defines with properties closes them
// (additionalProperties false), so a misspelt key anywhere is refused.
func TestSchemaClosed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(Dir(root), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if props, ok := s["properties"].(map[string]any); ok {
			n++
			if s["additionalProperties"] != false {
				t.Errorf("%s: properties without additionalProperties: false", path)
			}
			for k, v := range props {
				if m, ok := v.(map[string]any); ok {
					walk(path+"/"+k, m)
				}
			}
		}
		for _, k := range []string{"items", "additionalProperties"} {
			if m, ok := s[k].(map[string]any); ok {
				walk(path+"/"+k, m)
			}
		}
	}
	walk("", schema)
	if n < 20 {
		t.Errorf("only %d objects with properties in the schema", n)
	}
}
