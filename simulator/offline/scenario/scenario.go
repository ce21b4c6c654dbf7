// Package scenario reads what a golden scenario of draxr simulate runs
// with (testdata/scenarios/*/options.yaml: the CLI flags), for the tests
// that run the scenarios: the goldens' and the ProvisioningRequest step's.
package scenario

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/simulator/expander"
	"draxr.dev/draxr/simulator/offline"
)

// flags is options.yaml: the CLI flags a scenario runs with.
type flags struct {
	Expander           string              `json:"expander,omitempty"`
	ExpanderPriorities map[string][]string `json:"expanderPriorities,omitempty"`
	MaxNodesTotal      int                 `json:"maxNodesTotal,omitempty"`
}

// Options are the planner's options from the options.yaml at path; a
// missing file means the CLI's defaults.
func Options(path string) (offline.Options, error) {
	var o flags
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return offline.Options{}, err
	default:
		if err := yaml.UnmarshalStrict(data, &o); err != nil {
			return offline.Options{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	var prio []byte
	if o.ExpanderPriorities != nil {
		if prio, err = yaml.Marshal(o.ExpanderPriorities); err != nil {
			return offline.Options{}, err
		}
	}
	exp, err := expander.New(o.Expander, prio, 1) // the CLI's seed
	if err != nil {
		return offline.Options{}, fmt.Errorf("%s: %w", path, err)
	}
	return offline.Options{Expander: exp, MaxNodesTotal: o.MaxNodesTotal}, nil
}
