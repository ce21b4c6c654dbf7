package core

import (
	"testing"

	"draxr.dev/draxr/simulator/provreq"
	"draxr.dev/draxr/simulator/scaleup"
)

// A loop that changed the cluster is productive (the next one starts at
// once); one that only looked, or a dry run, is not.
func TestLoopResultProductive(t *testing.T) {
	up := &scaleup.ScaleUp{NewNodes: 2}
	tests := []struct {
		name string
		res  *LoopResult
		want bool
	}{
		{"no loop result (the loop failed early)", nil, false},
		{"nothing to do", &LoopResult{Unschedulable: 3}, false},
		{"a scale-up", &LoopResult{ScaleUp: up, ScaleUps: []scaleup.ScaleUp{*up}}, true},
		{"nodes removed", &LoopResult{Removed: []string{"n1"}}, true},
		{"a ProvisioningRequest decided", &LoopResult{ProvisioningRequests: []provreq.Report{{Name: "r"}}}, true},
		{"only unneeded nodes found", &LoopResult{Unneeded: []string{"n1"}}, false},
		{"a dry run's scale-up", &LoopResult{DryRun: true, ScaleUp: up, ScaleUps: []scaleup.ScaleUp{*up}}, false},
	}
	for _, tc := range tests {
		if got := tc.res.Productive(); got != tc.want {
			t.Errorf("%s: Productive() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
