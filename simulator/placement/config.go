package placement

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// DefaultProfile is kube-scheduler's default profile as of v1.37.
func DefaultProfile() (*config.KubeSchedulerProfile, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	return &cfg.Profiles[0], nil
}

// LoadProfile reads a KubeSchedulerConfiguration file, applies the
// scheduler's defaulting and validation, and returns the profile for
// schedulerName ("" means the first profile).
func LoadProfile(path, schedulerName string) (*config.KubeSchedulerProfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return ParseProfile(data, path, schedulerName)
}

// ParseProfile is LoadProfile on bytes; source names them in errors.
func ParseProfile(data []byte, source, schedulerName string) (*config.KubeSchedulerProfile, error) {
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("scheduler config %s: %w", source, err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("scheduler config %s: got %T, want KubeSchedulerConfiguration", source, obj)
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, fmt.Errorf("scheduler config %s: %w", source, err)
	}
	for i := range cfg.Profiles {
		if schedulerName == "" || cfg.Profiles[i].SchedulerName == schedulerName {
			profile := &cfg.Profiles[i]
			// The scheduler bounds its search by the profile's value, else
			// the configuration's: the profile carries the one in force.
			if profile.PercentageOfNodesToScore == nil {
				profile.PercentageOfNodesToScore = cfg.PercentageOfNodesToScore
			}
			return profile, nil
		}
	}
	return nil, fmt.Errorf("scheduler config %s: %s", source,
		field.NotFound(field.NewPath("profiles").Key("schedulerName"), schedulerName))
}
