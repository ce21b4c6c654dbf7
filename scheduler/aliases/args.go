package aliases

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// newVersionedArgs makes an empty v1 args object for the plugins that
// take one; false for the others.
func newVersionedArgs(upstream string) (runtime.Object, bool) {
	switch upstream {
	case names.DynamicResources:
		return &configv1.DynamicResourcesArgs{}, true
	case names.NodeResourcesFit:
		return &configv1.NodeResourcesFitArgs{}, true
	case names.NodeResourcesBalancedAllocation:
		return &configv1.NodeResourcesBalancedAllocationArgs{}, true
	}
	return nil, false
}

// pluginArgs turns what the configuration gave the wrapped plugin into the
// upstream plugin's internal args type. kube-scheduler decodes args only
// for in-tree names, so a wrapped plugin's args arrive as raw JSON
// (runtime.Unknown), or nil when omitted; both get the v1 defaulting.
func pluginArgs(upstream string, args runtime.Object) (runtime.Object, error) {
	v, ok := newVersionedArgs(upstream)
	if !ok {
		return args, nil
	}
	switch a := args.(type) {
	case nil:
		return defaultArgs(upstream)
	case *runtime.Unknown:
		if len(a.Raw) == 0 {
			return defaultArgs(upstream)
		}
		if err := json.Unmarshal(a.Raw, v); err != nil {
			return nil, fmt.Errorf("pluginConfig args: %w", err)
		}
		scheme.Scheme.Default(v)
		internal, err := scheme.Scheme.ConvertToVersion(v, config.SchemeGroupVersion)
		if err != nil {
			return nil, fmt.Errorf("pluginConfig args: %w", err)
		}
		return internal, nil
	default:
		return args, nil // already the internal type
	}
}

func defaultArgs(upstream string) (runtime.Object, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == upstream {
			return pc.Args, nil
		}
	}
	return nil, fmt.Errorf("no default args for %s", upstream)
}
