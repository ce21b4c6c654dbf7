package limits

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

func parse(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	var f Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Options()
}

func TestDefaultsAreCAs(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.Limits.Cores != (Range{0, 320000}) || o.Limits.Memory != (Range{0, 6400000 * GiB}) || len(o.Limits.GPUs) != 0 {
		t.Errorf("limits = %+v, want cores 0:320000, memory 0:6400000 GiB, no GPU limit", o.Limits)
	}
	if o.MaxNodesPerScaleUp != 1000 || o.Balancing.Enabled {
		t.Errorf("max nodes per scale-up %d, balancing %v; want 1000, off", o.MaxNodesPerScaleUp, o.Balancing.Enabled)
	}
}

func TestFlagsParse(t *testing.T) {
	o, err := parse(t, "--cores-total=8:64", "--memory-total=16:256", "--gpu-total=nvidia.com/gpu:1:16",
		"--gpu-total=deviceclass.resource.kubernetes.io/gpu.example.com:0:8", "--max-nodes-per-scaleup=5",
		"--balance-similar-node-groups", "--balancing-ignore-label=pool", "--balancing-ignore-label=example.com/rack")
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{Cores: Range{8, 64}, Memory: Range{16 * GiB, 256 * GiB}, GPUs: []GPULimit{
		{Type: "nvidia.com/gpu", Range: Range{1, 16}},
		{Type: v1.ResourceName("deviceclass.resource.kubernetes.io/gpu.example.com"), Range: Range{0, 8}}}}
	if o.Limits.Cores != want.Cores || o.Limits.Memory != want.Memory || len(o.Limits.GPUs) != 2 ||
		o.Limits.GPUs[0] != want.GPUs[0] || o.Limits.GPUs[1] != want.GPUs[1] {
		t.Errorf("limits = %+v, want %+v", o.Limits, want)
	}
	if o.MaxNodesPerScaleUp != 5 || !o.Balancing.Enabled || strings.Join(o.Balancing.IgnoreLabels, ",") != "pool,example.com/rack" {
		t.Errorf("options = %+v", o)
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--cores-total=64"}, `--cores-total "64": want <min>:<max>`},
		{[]string{"--cores-total=a:64"}, `--cores-total "a:64": min "a" is not a whole number`},
		{[]string{"--cores-total=8:4"}, `--cores-total "8:4": max must be >= min`},
		{[]string{"--memory-total=-1:4"}, `--memory-total "-1:4": min must be >= 0`},
		{[]string{"--gpu-total=nvidia.com/gpu:16"}, `--gpu-total "nvidia.com/gpu:16": want <gpu_type>:<min>:<max>`},
		{[]string{"--gpu-total=nvidia-tesla-k80:0:16"}, `GPU type "nvidia-tesla-k80" must be an extended resource name`},
		{[]string{"--gpu-total=nvidia.com/gpu:4:2"}, `--gpu-total "nvidia.com/gpu:4:2": max must be >= min`},
		{[]string{"--gpu-total=nvidia.com/gpu:0:2", "--gpu-total=nvidia.com/gpu:0:4"}, "GPU type nvidia.com/gpu is given twice"},
		{[]string{"--max-nodes-per-scaleup=0"}, "--max-nodes-per-scaleup must be >= 1, got 0"},
		{[]string{"--balancing-label=pool", "--balancing-ignore-label=zone"}, "--balancing-label cannot be combined with --balancing-ignore-label"},
		{[]string{"--balancing-ignore-label=bad key"}, `balancing label "bad key" is not a label key`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parse(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestNodesWithin(t *testing.T) {
	left := Amounts{Cores: 130, "nvidia.com/gpu": 16}
	if n, over := NodesWithin(left, Amounts{Cores: 64, "nvidia.com/gpu": 8}, 10); n != 2 || len(over) != 0 {
		t.Errorf("NodesWithin = %d %v, want 2 nodes", n, over)
	}
	if n, over := NodesWithin(Amounts{Cores: 10, "nvidia.com/gpu": 4}, Amounts{Cores: 64, "nvidia.com/gpu": 8}, 10); n != 0 || strings.Join(over, ",") != "cpu,nvidia.com/gpu" {
		t.Errorf("NodesWithin = %d %v, want 0, over cpu and nvidia.com/gpu", n, over)
	}
	if n, _ := NodesWithin(Amounts{"nvidia.com/gpu": 0}, Amounts{Cores: 64}, 3); n != 3 {
		t.Errorf("a node without the GPU is held back: %d, want 3", n)
	}
}
