package driver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"draxr.dev/draxr/kubelet/cdi"
	"draxr.dev/draxr/kubelet/inventory"
)

const testDriver = "gpu.example.com"

// testConfig is a driver on node-a with devices gpu-0..gpu-3, writing
// into dir.
func testConfig(dir string) Config {
	return Config{DriverName: testDriver, NodeName: "node-a", Inventory: inventory.Uniform("gpu", 4, "example"),
		CDIDir: filepath.Join(dir, "cdi"), CDIClass: "gpu", StateFile: filepath.Join(dir, "state", "prepared.json")}
}

func newTestDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type result struct{ request, driver, pool, device string }

// allocated is an allocated claim with the given results.
func allocated(uid, name string, results ...result) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, r := range results {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: r.request, Driver: r.driver, Pool: r.pool, Device: r.device})
	}
	return c
}

func gpu(request, device string) result { return result{request, testDriver, "node-a", device} }

// ids maps request -> CDI IDs of a prepare result.
func ids(res kubeletplugin.PrepareResult) map[string][]string {
	out := map[string][]string{}
	for _, d := range res.Devices {
		for _, r := range d.Requests {
			out[r] = append(out[r], d.CDIDeviceIDs...)
		}
	}
	return out
}

func prepare(t *testing.T, d *Driver, claims ...*resourceapi.ResourceClaim) map[types.UID]kubeletplugin.PrepareResult {
	t.Helper()
	res, err := d.PrepareResourceClaims(context.Background(), claims)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(claims) {
		t.Fatalf("%d results for %d claims", len(res), len(claims))
	}
	return res
}

func unprepare(t *testing.T, d *Driver, claims ...*resourceapi.ResourceClaim) {
	t.Helper()
	var refs []kubeletplugin.NamespacedObject
	for _, c := range claims {
		refs = append(refs, kubeletplugin.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID})
	}
	res, err := d.UnprepareResourceClaims(context.Background(), refs)
	if err != nil {
		t.Fatal(err)
	}
	for uid, err := range res {
		if err != nil {
			t.Fatalf("unprepare %s: %v", uid, err)
		}
	}
}

func specDevices(t *testing.T, path string) (kind string, names, env []string) {
	t.Helper()
	spec, err := cdi.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range spec.Devices {
		names = append(names, d.Name)
		env = append(env, d.ContainerEdits.Env...)
	}
	return spec.Kind, names, env
}

func TestPrepareWritesSpecAndReturnsIDs(t *testing.T) {
	cfg := testConfig(t.TempDir())
	d := newTestDriver(t, cfg)
	// The scheduler's extended-resource claim for containers 0 and 2, plus
	// a result of another driver the claim may hold.
	claim := allocated("uid-1", "pod-extended-resources-x",
		gpu("container-0-request-0", "gpu-2"), gpu("container-2-request-0", "gpu-0"),
		result{"container-2-request-1", "nic.example.com", "node-a", "nic-0"})
	res := prepare(t, d, claim)["uid-1"]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := map[string][]string{
		"container-0-request-0": {"gpu.example.com/gpu=gpu-2"},
		"container-2-request-0": {"gpu.example.com/gpu=gpu-0"},
	}
	if got := ids(res); len(got) != len(want) || !slices.Equal(got["container-0-request-0"], want["container-0-request-0"]) ||
		!slices.Equal(got["container-2-request-0"], want["container-2-request-0"]) {
		t.Errorf("CDI IDs per request = %v, want %v", got, want)
	}
	for _, dev := range res.Devices {
		if dev.PoolName != "node-a" {
			t.Errorf("device %s: pool %q", dev.DeviceName, dev.PoolName)
		}
	}
	path := filepath.Join(cfg.CDIDir, "gpu.example.com-uid-1.json")
	kind, names, env := specDevices(t, path)
	if kind != "gpu.example.com/gpu" || !slices.Equal(names, []string{"gpu-2", "gpu-0"}) {
		t.Errorf("CDI spec %s: kind %s, devices %v; want gpu.example.com/gpu with gpu-2, gpu-0", path, kind, names)
	}
	if !slices.Contains(env, "DRAXR_DEVICE_GPU_2=gpu.example.com/node-a/gpu-2") {
		t.Errorf("CDI spec env %v, want DRAXR_DEVICE_GPU_2 for gpu-2", env)
	}
}

func TestPrepareRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		claim   *resourceapi.ResourceClaim
		wantErr string
	}{
		{name: "device not in the inventory", claim: allocated("uid-2", "c", gpu("r", "gpu-9")), wantErr: "not one of this node's devices"},
		{name: "device of another node's pool", claim: allocated("uid-2", "c", result{"r", testDriver, "node-b", "gpu-1"}), wantErr: "not one of this node's devices"},
		{name: "device prepared for another claim", claim: allocated("uid-2", "c", gpu("r", "gpu-0")), wantErr: "already prepared for claim ns/held (uid-1)"},
		{name: "not allocated", claim: &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: "uid-2"}}, wantErr: "not allocated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			d := newTestDriver(t, cfg)
			if res := prepare(t, d, allocated("uid-1", "held", gpu("r", "gpu-0")))["uid-1"]; res.Err != nil {
				t.Fatal(res.Err)
			}
			res := prepare(t, d, tc.claim)["uid-2"]
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", res.Err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Join(cfg.CDIDir, "gpu.example.com-uid-2.json")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("refused claim has a CDI spec (stat: %v)", err)
			}
			if _, ok := d.Prepared().Claims["uid-2"]; ok {
				t.Error("refused claim is remembered as prepared")
			}
		})
	}
}

// The kubelet repeats prepare (after its own restart); the answer is the
// same, and a lost spec file (CDI folders are often on tmpfs) comes back.
func TestPrepareIsIdempotent(t *testing.T) {
	cfg := testConfig(t.TempDir())
	d := newTestDriver(t, cfg)
	claim := allocated("uid-1", "c", gpu("r", "gpu-1"))
	first := ids(prepare(t, d, claim)["uid-1"])
	path := filepath.Join(cfg.CDIDir, "gpu.example.com-uid-1.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	again := prepare(t, d, claim)["uid-1"]
	if again.Err != nil || !slices.Equal(ids(again)["r"], first["r"]) {
		t.Fatalf("second prepare = %v (%v), want %v", ids(again), again.Err, first)
	}
	if _, names, _ := specDevices(t, path); !slices.Equal(names, []string{"gpu-1"}) {
		t.Errorf("rewritten spec devices %v", names)
	}
}

func TestUnprepareRemovesSpec(t *testing.T) {
	cfg := testConfig(t.TempDir())
	d := newTestDriver(t, cfg)
	claim := allocated("uid-1", "c", gpu("r", "gpu-1"))
	prepare(t, d, claim)
	unprepare(t, d, claim)
	if _, err := os.Stat(filepath.Join(cfg.CDIDir, "gpu.example.com-uid-1.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CDI spec still there after unprepare (stat: %v)", err)
	}
	if st, err := LoadState(cfg.StateFile); err != nil || len(st.Claims) != 0 {
		t.Errorf("state after unprepare = %v (%v), want no claims", st.Claims, err)
	}
	// Repeated, and for a claim never prepared: no error.
	unprepare(t, d, claim, allocated("uid-unknown", "other"))
	// The device is free for the next claim.
	if res := prepare(t, d, allocated("uid-2", "next", gpu("r", "gpu-1")))["uid-2"]; res.Err != nil {
		t.Errorf("freed device: %v", res.Err)
	}
}

// A restarted driver knows what the previous process prepared: it still
// refuses the device to another claim, and unprepares the claim.
func TestRestartKeepsPreparedClaims(t *testing.T) {
	cfg := testConfig(t.TempDir())
	claim := allocated("uid-1", "c", gpu("r", "gpu-3"))
	prepare(t, newTestDriver(t, cfg), claim)

	restarted := newTestDriver(t, cfg)
	got, ok := restarted.Prepared().Claims["uid-1"]
	if !ok || len(got.Devices) != 1 || got.Devices[0].Device != "gpu-3" || got.Devices[0].CDIDeviceID != "gpu.example.com/gpu=gpu-3" {
		t.Fatalf("after restart: prepared %+v, want uid-1 with gpu-3", restarted.Prepared().Claims)
	}
	if res := prepare(t, restarted, allocated("uid-2", "thief", gpu("r", "gpu-3")))["uid-2"]; res.Err == nil {
		t.Error("restarted driver gave gpu-3 to a second claim")
	}
	unprepare(t, restarted, claim)
	if _, err := os.Stat(filepath.Join(cfg.CDIDir, "gpu.example.com-uid-1.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CDI spec still there after unprepare by the restarted driver (stat: %v)", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "no node", mutate: func(c *Config) { c.NodeName = "" }, wantErr: "required"},
		{name: "bad CDI class", mutate: func(c *Config) { c.CDIClass = "a/b" }, wantErr: "CDI class"},
		{name: "bad inventory", mutate: func(c *Config) { c.Inventory = inventory.Inventory{} }, wantErr: "no devices"},
		{name: "corrupt state file", mutate: func(c *Config) { _ = os.WriteFile(c.StateFile, []byte("{"), 0o644) }, wantErr: "state file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.StateFile = filepath.Join(t.TempDir(), "state.json")
			tc.mutate(&cfg)
			if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// The health watch reports every inventory device Healthy in this node's
// pool, and returns once the kubelet goes away.
func TestWatchHealthStatus(t *testing.T) {
	d := newTestDriver(t, testConfig(t.TempDir()))
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan kubeletplugin.DeviceHealthReport)
	done := make(chan error, 1)
	go func() { done <- d.WatchHealthStatus(ctx, reports) }()
	report := <-reports
	var names []string
	for _, h := range report.Devices {
		names = append(names, h.DeviceName)
		if h.Health != kubeletplugin.HealthStatusHealthy || h.PoolName != "node-a" || h.HealthCheckTimeout <= 0 {
			t.Errorf("device %s: health %q in pool %q, timeout %v", h.DeviceName, h.Health, h.PoolName, h.HealthCheckTimeout)
		}
	}
	if !slices.Equal(names, d.deviceNames) || len(names) == 0 {
		t.Errorf("report covers %v, want every device %v", names, d.deviceNames)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchHealthStatus after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchHealthStatus kept running after its context ended")
	}
}
