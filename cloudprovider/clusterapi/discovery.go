package clusterapi

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"draxr.dev/draxr/simulator/nodegroup/capi"
)

// Discovery is one --node-group-auto-discovery spec:
// "clusterapi:namespace=<ns>,clusterName=<name>,<label>=<value>,...".
type Discovery struct {
	Namespace   string
	ClusterName string
	Selector    labels.Selector
}

// ParseAutoDiscovery parses the flag's values with CA's rules: exactly
// one ":" after the discoverer "clusterapi"; comma-separated key=value
// pairs, empty ones skipped; namespace and clusterName are fields, every
// other key is a label that must equal the value.
func ParseAutoDiscovery(specs []string) ([]Discovery, error) {
	var out []Discovery
	for _, spec := range specs {
		tokens := strings.Split(spec, ":")
		if len(tokens) != 2 {
			return nil, fmt.Errorf("--node-group-auto-discovery %q: should be discoverer:key=value,key=value", spec)
		}
		if tokens[0] != "clusterapi" {
			return nil, fmt.Errorf("--node-group-auto-discovery %q: unsupported discoverer %q (supported: clusterapi)", spec, tokens[0])
		}
		d := Discovery{Selector: labels.NewSelector()}
		for _, arg := range strings.Split(tokens[1], ",") {
			if arg == "" {
				continue
			}
			kv := strings.Split(arg, "=")
			if len(kv) != 2 {
				return nil, fmt.Errorf("--node-group-auto-discovery %q: invalid key=value pair %q", spec, arg)
			}
			switch kv[0] {
			case "clusterName":
				d.ClusterName = kv[1]
			case "namespace":
				d.Namespace = kv[1]
			default:
				req, err := labels.NewRequirement(kv[0], selection.Equals, []string{kv[1]})
				if err != nil {
					return nil, fmt.Errorf("--node-group-auto-discovery %q: label selector: %w", spec, err)
				}
				d.Selector = d.Selector.Add(*req)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// allows reports whether r is a group under the specs: with none, every
// annotated resource is; with some, a resource any of them matches.
func allows(specs []Discovery, r capi.Resource) bool {
	if len(specs) == 0 {
		return true
	}
	for _, d := range specs {
		if (d.Namespace == "" || d.Namespace == r.Namespace) &&
			(d.ClusterName == "" || d.ClusterName == r.ClusterName) &&
			d.Selector.Matches(labels.Set(r.Labels)) {
			return true
		}
	}
	return false
}

// namespaceToWatch is the first namespace a spec names, else all (as CA).
func namespaceToWatch(specs []Discovery) string {
	for _, d := range specs {
		if d.Namespace != "" {
			return d.Namespace
		}
	}
	return ""
}
