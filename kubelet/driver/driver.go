// Package driver is draxr's reference DRA driver: it publishes a
// configured device inventory as the node's ResourceSlices and prepares
// allocated devices as CDI devices, one CDI spec file per claim. It runs
// on k8s.io/dynamic-resource-allocation/kubeletplugin, the helper real
// drivers use, so the kubelet talks to it exactly as to a vendor driver.
package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"draxr.dev/draxr/kubelet/cdi"
	"draxr.dev/draxr/kubelet/inventory"
)

// Config configures a driver instance on one node.
type Config struct {
	// DriverName is the DRA driver name, e.g. gpu.example.com; it is also
	// the CDI vendor.
	DriverName string
	// NodeName names the node and the driver's pool on it.
	NodeName  string
	Inventory inventory.Inventory
	// CDIDir is where spec files go (/var/run/cdi); CDIClass is the CDI
	// class ("gpu"), so device IDs read "gpu.example.com/gpu=gpu-0".
	CDIDir   string
	CDIClass string
	// StateFile remembers prepared claims across restarts.
	StateFile string
}

// Driver implements kubeletplugin.DRAPlugin.
type Driver struct {
	cfg         Config
	cdi         cdi.Dir
	devices     map[string]bool // names in the inventory
	deviceNames []string        // the same, in inventory order

	mu    sync.Mutex
	state State

	// fatal is called for background errors that retrying cannot fix;
	// Serve sets it to stop the driver.
	fatal func(error)
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// New validates the configuration and loads the prepared claims a
// previous run left in the state file.
func New(cfg Config) (*Driver, error) {
	if cfg.DriverName == "" || cfg.NodeName == "" || cfg.StateFile == "" {
		return nil, errors.New("driver name, node name and state file are required")
	}
	dir := cdi.Dir{Path: cfg.CDIDir, Vendor: cfg.DriverName, Class: cfg.CDIClass}
	if err := dir.Validate(); err != nil {
		return nil, err
	}
	devices, err := cfg.Inventory.Devices()
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	st, err := LoadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, cdi: dir, devices: map[string]bool{}, state: st}
	for _, dev := range devices {
		d.devices[dev.Name] = true
		d.deviceNames = append(d.deviceNames, dev.Name)
	}
	return d, nil
}

// Prepared returns a copy of the claims currently prepared.
func (d *Driver) Prepared() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state.clone()
}

// PrepareResourceClaims writes one CDI spec per claim with the claim's
// devices of this driver and returns each device's CDI ID under the
// request it was allocated for; the kubelet gives a container the IDs of
// the requests that container uses.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Preparing claim failed", "claim", klog.KObj(claim))
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		res := kubeletplugin.PrepareResult{Devices: []kubeletplugin.Device{}}
		for _, dev := range devices {
			res.Devices = append(res.Devices, kubeletplugin.Device{
				Requests: []string{dev.Request}, PoolName: dev.Pool, DeviceName: dev.Device,
				CDIDeviceIDs: []string{dev.CDIDeviceID},
			})
		}
		out[claim.UID] = res
	}
	return out, nil
}

func (d *Driver) prepare(claim *resourceapi.ResourceClaim) ([]PreparedDevice, error) {
	if known, ok := d.state.Claims[claim.UID]; ok {
		// The kubelet repeats prepare after its own restart; answer the
		// same and rewrite the spec in case the CDI directory was wiped
		// (it is often on tmpfs, /var/run).
		return known.Devices, d.writeSpec(claim.UID, known.Devices)
	}
	if claim.Status.Allocation == nil {
		return nil, errors.New("claim is not allocated")
	}
	var devices []PreparedDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.cfg.DriverName {
			continue
		}
		if r.Pool != d.cfg.NodeName || !d.devices[r.Device] {
			return nil, fmt.Errorf("device %s/%s is not one of this node's devices", r.Pool, r.Device)
		}
		// The last line of defence against double use: one device, one
		// claim. Device names double as CDI names, so sharing would also
		// define one CDI device in two spec files.
		if holder, ok := d.holder(r.Device); ok {
			return nil, fmt.Errorf("device %s is already prepared for claim %s", r.Device, holder)
		}
		devices = append(devices, PreparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, CDIDeviceID: d.cdi.ID(r.Device)})
	}
	// Spec first, then state: after a crash in between, the next prepare
	// rewrites the same file; the other order could remember a claim
	// whose spec was never written.
	if err := d.writeSpec(claim.UID, devices); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	d.state.Claims[claim.UID] = PreparedClaim{Namespace: claim.Namespace, Name: claim.Name, Devices: devices}
	if err := d.state.save(d.cfg.StateFile); err != nil {
		delete(d.state.Claims, claim.UID)
		_ = d.cdi.Remove(string(claim.UID))
		return nil, fmt.Errorf("save state: %w", err)
	}
	return devices, nil
}

func (d *Driver) holder(device string) (string, bool) {
	for uid, c := range d.state.Claims {
		for _, dev := range c.Devices {
			if dev.Device == device {
				return fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, uid), true
			}
		}
	}
	return "", false
}

// writeSpec writes the claim's CDI spec. A claim without devices of this
// driver gets no file: CDI rejects a spec without devices.
func (d *Driver) writeSpec(claimUID types.UID, devices []PreparedDevice) error {
	if len(devices) == 0 {
		return nil
	}
	var specDevices []cdi.Device
	for _, dev := range devices {
		if slices.ContainsFunc(specDevices, func(s cdi.Device) bool { return s.Name == dev.Device }) {
			continue // one device serving two requests of the claim
		}
		specDevices = append(specDevices, cdi.Device{Name: dev.Device, ContainerEdits: cdi.ContainerEdits{
			Env: []string{envName(dev.Device) + "=" + d.cfg.DriverName + "/" + dev.Pool + "/" + dev.Device},
		}})
	}
	return d.cdi.Write(string(claimUID), specDevices)
}

// envName is the variable a container sees for a device, e.g.
// DRAXR_DEVICE_GPU_0; one per device, so several devices do not
// overwrite each other.
func envName(device string) string {
	return "DRAXR_DEVICE_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r - 'a' + 'A'
		}
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, device)
}

// UnprepareResourceClaims removes the claims' spec files and forgets
// them. Unknown claims are fine: the call is repeated after restarts.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := d.cdi.Remove(string(claim.UID))
		if err == nil {
			if _, ok := d.state.Claims[claim.UID]; ok {
				delete(d.state.Claims, claim.UID)
				err = d.state.save(d.cfg.StateFile)
			}
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Unpreparing claim failed", "claim", claim.NamespacedName)
		}
		out[claim.UID] = err
	}
	return out, nil
}

// HandleError logs background errors (ResourceSlice publishing, gRPC
// servers) and stops the driver on those that retrying cannot fix.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.fatal != nil {
		d.fatal(fmt.Errorf("%s: %w", msg, err))
	}
}
