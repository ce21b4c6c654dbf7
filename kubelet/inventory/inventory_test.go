package inventory

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func names(devices []resourceapi.Device) []string {
	var out []string
	for _, d := range devices {
		out = append(out, d.Name)
	}
	return out
}

func TestDevices(t *testing.T) {
	model := "a100"
	mem := resource.MustParse("80Gi")
	for _, tc := range []struct {
		name    string
		inv     Inventory
		want    string // device names, comma separated
		wantErr string
	}{
		{name: "uniform", inv: Uniform("gpu", 3, "x"), want: "gpu-0,gpu-1,gpu-2"},
		{name: "single named device and a group", inv: Inventory{Groups: []Group{{Name: "big"}, {Name: "small", Count: 2}}},
			want: "big,small-0,small-1"},
		{name: "attributes and capacity", inv: Inventory{Groups: []Group{{Name: "gpu", Count: 1,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &model}},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: mem}}}}},
			want: "gpu-0"},
		{name: "duplicate", inv: Inventory{Groups: []Group{{Name: "gpu", Count: 2}, {Name: "gpu-1"}}}, wantErr: `device "gpu-1" listed twice`},
		{name: "not a DNS label", inv: Inventory{Groups: []Group{{Name: "GPU"}}}, wantErr: `device name "GPU"`},
		{name: "negative count", inv: Inventory{Groups: []Group{{Name: "gpu", Count: -1}}}, wantErr: "negative count"},
		{name: "empty", inv: Inventory{}, wantErr: "no devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devices, err := tc.inv.Devices()
			if endsInError(t, err, tc.wantErr) {
				return
			}
			if got := strings.Join(names(devices), ","); got != tc.want {
				t.Errorf("devices = %s, want %s", got, tc.want)
			}
		})
	}
}

// Every device of a group carries the group's attributes and capacity,
// each in its own map (a later change to one device must not leak).
func TestDevicesCopyAttributes(t *testing.T) {
	inv := Uniform("gpu", 2, "a100")
	devices, err := inv.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devices {
		if v := d.Attributes["model"].StringValue; v == nil || *v != "a100" {
			t.Errorf("%s: model = %v, want a100", d.Name, v)
		}
	}
	delete(devices[0].Attributes, "model")
	if _, ok := devices[1].Attributes["model"]; !ok {
		t.Error("devices share one attribute map")
	}
}

// The node's pool holds every device, split into slices within the API's
// limit per slice.
func TestResources(t *testing.T) {
	for _, tc := range []struct {
		devices    int
		wantSlices []int
	}{
		{devices: 8, wantSlices: []int{8}},
		{devices: resourceapi.ResourceSliceMaxDevices, wantSlices: []int{resourceapi.ResourceSliceMaxDevices}},
		{devices: resourceapi.ResourceSliceMaxDevices + 1, wantSlices: []int{resourceapi.ResourceSliceMaxDevices, 1}},
	} {
		res, err := Uniform("gpu", tc.devices, "").Resources("node-a")
		if err != nil {
			t.Fatal(err)
		}
		pool, ok := res.Pools["node-a"]
		if len(res.Pools) != 1 || !ok {
			t.Fatalf("%d devices: pools %v, want one pool named after the node", tc.devices, res.Pools)
		}
		var got []int
		for _, s := range pool.Slices {
			got = append(got, len(s.Devices))
		}
		if !slices.Equal(got, tc.wantSlices) {
			t.Errorf("%d devices: slice sizes %v, want %v", tc.devices, got, tc.wantSlices)
		}
		if last := pool.Slices[len(pool.Slices)-1].Devices; last[len(last)-1].Name != "gpu-"+strconv.Itoa(tc.devices-1) {
			t.Errorf("%d devices: last device %s", tc.devices, last[len(last)-1].Name)
		}
	}
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantErr string
		check               func(t *testing.T, devices []resourceapi.Device)
	}{
		{name: "attributes and capacity", yaml: `
devices:
- name: gpu
  count: 2
  attributes:
    model: {string: example-a100}
    index: {int: 7}
    example.com/mig: {bool: true}
  capacity:
    memory: {value: 80Gi}
- name: nic
`, check: func(t *testing.T, devices []resourceapi.Device) {
			if got := strings.Join(names(devices), ","); got != "gpu-0,gpu-1,nic" {
				t.Fatalf("devices %s", got)
			}
			d := devices[1]
			if *d.Attributes["model"].StringValue != "example-a100" || *d.Attributes["index"].IntValue != 7 || !*d.Attributes["example.com/mig"].BoolValue {
				t.Errorf("attributes %+v", d.Attributes)
			}
			if q := d.Capacity["memory"].Value; q.Cmp(resource.MustParse("80Gi")) != 0 {
				t.Errorf("memory capacity %s", q.String())
			}
		}},
		{name: "typo in a field", yaml: "devices:\n- name: gpu\n  cuont: 2\n", wantErr: "unknown field"},
		{name: "invalid device name", yaml: "devices:\n- name: gpu_0\n", wantErr: `device name "gpu_0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "inventory.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			inv, err := Load(path)
			if endsInError(t, err, tc.wantErr) {
				return
			}
			tc.check(t, devicesOf(t, inv))
		})
	}
}

// endsInError checks err against want (a substring; "" for no error) and
// reports whether the case ends there.
func endsInError(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

func devicesOf(t *testing.T, inv Inventory) []resourceapi.Device {
	t.Helper()
	devices, err := inv.Devices()
	if err != nil {
		t.Fatal(err)
	}
	return devices
}
