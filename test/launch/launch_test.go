package launch

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The flags a test node and a driver get are the ones their commands
// define, with labels in a stable order.
func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{name: "node with in-process driver",
			got: Node{Name: "n", RootDir: "/r/n", Kubeconfig: "/k", Labels: map[string]string{"b": "2", "a": "1"},
				Taints: []v1.Taint{{Key: "gpu", Value: "true", Effect: v1.TaintEffectNoSchedule}}, ProviderID: "p://n",
				Driver: &InProcessDriver{Name: "gpu.example.com", Devices: 4}}.Args(),
			want: []string{"--name=n", "--root-dir=/r/n", "--kubeconfig=/k", "--v=0", "--node-labels=a=1,b=2",
				"--register-with-taints=gpu=true:NoSchedule", "--provider-id=p://n", "--driver-name=gpu.example.com", "--devices=4"}},
		{name: "stub node",
			got:  Node{Name: "n", RootDir: "/r/n", Kubeconfig: "/k", Stub: true, Verbosity: 3}.Args(),
			want: []string{"--name=n", "--root-dir=/r/n", "--kubeconfig=/k", "--v=3", "--stub-container-manager"}},
		{name: "driver process",
			got: Driver{Name: "gpu.example.com", NodeName: "n", KubeletDir: "/r/n", Kubeconfig: "/k", CDIDir: "/c", Devices: 2}.Args(),
			want: []string{"--driver-name=gpu.example.com", "--node-name=n", "--kubelet-dir=/r/n", "--kubeconfig=/k", "--cdi-dir=/c",
				"--state-file=/r/n/plugins/gpu.example.com/prepared-claims.json", "--devices=2", "--v=0"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}

// A node or driver with settings missing starts nothing, and the error
// names each missing setting.
func TestStartNamesMissingSettings(t *testing.T) {
	tests := []struct {
		name  string
		start func() error
		want  string
	}{
		{"node without binary, root dir, kubeconfig", func() error {
			_, err := StartNode(Node{Name: "n1"})
			return err
		}, `test node "n1": Binary, RootDir, Kubeconfig required`},
		{"node complete but kubeconfig", func() error {
			_, err := StartNode(Node{Binary: "/bin/true", Name: "n1", RootDir: "/tmp/n1"})
			return err
		}, `test node "n1": Kubeconfig required`},
		{"driver without node and dirs", func() error {
			_, err := StartDriver(Driver{Binary: "/bin/true", Name: "gpu.example.com"})
			return err
		}, `driver "/gpu.example.com": NodeName, KubeletDir, CDIDir required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.start()
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}
