package placement

import (
	"time"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// BindingTimeout is how long the profile's DynamicResources plugin waits
// in PreBind for device binding conditions (KEP-5007): its
// bindingTimeout, or the scheduler's default; 0 for a nil profile, which
// callers read as the default.
func BindingTimeout(profile *config.KubeSchedulerProfile) time.Duration {
	if profile == nil {
		return 0
	}
	for _, pc := range profile.PluginConfig {
		if pc.Name != names.DynamicResources {
			continue
		}
		if args, ok := pc.Args.(*config.DynamicResourcesArgs); ok && args.BindingTimeout != nil {
			return args.BindingTimeout.Duration
		}
	}
	return config.DynamicResourcesBindingTimeoutDefault
}
