package inventory

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The command line picks the devices a driver publishes: --devices and
// --device-prefix by default, the --inventory file when given.
func TestFlagsInventory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "inv.yaml")
	if err := os.WriteFile(file, []byte("devices:\n- {name: fpga, count: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("devices:\n- {name: fpga, cuont: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{"defaults", nil, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}, ""},
		{"count and prefix", []string{"--devices=2", "--device-prefix=nic"}, []string{"nic-0", "nic-1"}, ""},
		{"file wins over count", []string{"--devices=5", "--inventory=" + file}, []string{"fpga-0", "fpga-1"}, ""},
		{"bad file", []string{"--inventory=" + bad}, nil, bad + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Flags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			f.AddFlags(fs, "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			inv, err := f.Inventory()
			if endsInError(t, err, tt.wantErr) {
				return
			}
			if got := names(devicesOf(t, inv)); !slices.Equal(got, tt.want) {
				t.Errorf("devices = %v, want %v", got, tt.want)
			}
		})
	}
}
