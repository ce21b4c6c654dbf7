package taints

import "testing"

func TestTaintKinds(t *testing.T) {
	flags := Config{StartupTaints: []string{"node.cilium.io/agent-not-ready"}, StartupTaintPrefixes: []string{"example.com/booting-"},
		StatusTaints: []string{"example.com/maintenance"}}
	tests := []struct {
		key                            string
		cfg                            Config
		startup, status, leftOutOfCopy bool
	}{
		{key: "ignore-taint.cluster-autoscaler.kubernetes.io/cni", startup: true, leftOutOfCopy: true},
		{key: "startup-taint.cluster-autoscaler.kubernetes.io/driver", startup: true, leftOutOfCopy: true},
		{key: "status-taint.cluster-autoscaler.kubernetes.io/degraded", status: true, leftOutOfCopy: true},
		{key: "node.cilium.io/agent-not-ready", leftOutOfCopy: false},
		{key: "node.cilium.io/agent-not-ready", cfg: flags, startup: true, leftOutOfCopy: true},
		{key: "example.com/booting-disk", cfg: flags, startup: true, leftOutOfCopy: true},
		{key: "example.com/booting", cfg: flags},
		{key: "example.com/maintenance", cfg: flags, status: true, leftOutOfCopy: true},
		{key: "node.kubernetes.io/not-ready", leftOutOfCopy: true},
		{key: "node.cloudprovider.kubernetes.io/uninitialized", leftOutOfCopy: true},
		{key: ToBeDeleted, leftOutOfCopy: true},
		{key: DeletionCandidate, leftOutOfCopy: true},
		{key: "nvidia.com/gpu", cfg: flags},
	}
	for _, tc := range tests {
		if got := tc.cfg.IsStartup(tc.key); got != tc.startup {
			t.Errorf("%s (flags %v): startup %v, want %v", tc.key, tc.cfg, got, tc.startup)
		}
		if got := tc.cfg.IsStatus(tc.key); got != tc.status {
			t.Errorf("%s (flags %v): status %v, want %v", tc.key, tc.cfg, got, tc.status)
		}
		if got := tc.cfg.LeftOutOfTemplate(tc.key); got != tc.leftOutOfCopy {
			t.Errorf("%s (flags %v): left out of a template %v, want %v", tc.key, tc.cfg, got, tc.leftOutOfCopy)
		}
	}
}
