package cdi

import (
	"os"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		dir     Dir
		wantErr string
	}{
		{dir: Dir{Path: "/var/run/cdi", Vendor: "gpu.example.com", Class: "gpu"}},
		{dir: Dir{Path: "/var/run/cdi", Vendor: "gpu.example.com", Class: "gpu_v2.1"}},
		{dir: Dir{Path: "/var/run/cdi", Vendor: "gpu/example", Class: "gpu"}, wantErr: "CDI vendor"},
		{dir: Dir{Path: "/var/run/cdi", Vendor: "gpu.example.com", Class: "-gpu"}, wantErr: "CDI class"},
		{dir: Dir{Vendor: "gpu.example.com", Class: "gpu"}, wantErr: "no CDI directory"},
	} {
		err := tc.dir.Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: err = %v, want %q", tc.dir, err, tc.wantErr)
		}
	}
}

// A written spec is the only file in the folder (no temporary left for
// the runtime to trip over), reads back with its devices, and goes away
// on Remove, which may be repeated.
func TestWriteRemove(t *testing.T) {
	d := Dir{Path: t.TempDir(), Vendor: "gpu.example.com", Class: "gpu"}
	if got := d.ID("gpu-0"); got != "gpu.example.com/gpu=gpu-0" {
		t.Errorf("ID = %s", got)
	}
	if err := d.Write("uid-1", []Device{{Name: "gpu-0", ContainerEdits: ContainerEdits{Env: []string{"A=1"}}}}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(d.Path)
	if len(entries) != 1 || entries[0].Name() != "gpu.example.com-uid-1.json" {
		t.Fatalf("folder holds %v, want only gpu.example.com-uid-1.json", entries)
	}
	spec, err := Read(d.SpecPath("uid-1"))
	if err != nil || spec.Kind != "gpu.example.com/gpu" || spec.Version != Version || len(spec.Devices) != 1 || spec.Devices[0].Name != "gpu-0" {
		t.Fatalf("spec = %+v (%v)", spec, err)
	}
	for range 2 {
		if err := d.Remove("uid-1"); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(d.Path); len(entries) != 0 {
		t.Errorf("folder after Remove holds %v", entries)
	}
}
