// Package cdi writes and removes the Container Device Interface spec files
// through which a DRA driver tells the container runtime what a device
// means for a container. Only the part of the CDI format the reference
// driver needs is modelled, to keep the CDI library's dependencies out.
package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// Version is the CDI spec version written. Environment edits are valid
// from 0.3.0, which every CDI-capable containerd and CRI-O accepts.
const Version = "0.3.0"

// Spec is one CDI spec file.
type Spec struct {
	Version string   `json:"cdiVersion"`
	Kind    string   `json:"kind"`
	Devices []Device `json:"devices"`
}

// Device is one CDI device of a spec.
type Device struct {
	Name           string         `json:"name"`
	ContainerEdits ContainerEdits `json:"containerEdits"`
}

// ContainerEdits are the changes a runtime makes to a container that gets
// the device. CDI rejects a device with no edits at all.
type ContainerEdits struct {
	Env []string `json:"env,omitempty"`
}

// Dir is a CDI spec directory (/var/run/cdi on most nodes) and the kind
// (vendor/class) of the devices one driver writes there.
type Dir struct {
	Path   string
	Vendor string // e.g. gpu.example.com, the driver name
	Class  string // e.g. gpu
}

var (
	vendorRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?$`)
	classRE  = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$`)
)

// Validate checks vendor and class against CDI's naming rules, so a bad
// flag fails at start rather than in the runtime on the first pod.
func (d Dir) Validate() error {
	var errs []error
	if !vendorRE.MatchString(d.Vendor) {
		errs = append(errs, fmt.Errorf("CDI vendor %q: want letters, digits, '.' and '-'", d.Vendor))
	}
	if !classRE.MatchString(d.Class) {
		errs = append(errs, fmt.Errorf("CDI class %q: want letters, digits, '_', '.' and '-'", d.Class))
	}
	if d.Path == "" {
		errs = append(errs, errors.New("no CDI directory"))
	}
	return errors.Join(errs...)
}

// Kind is "vendor/class".
func (d Dir) Kind() string { return d.Vendor + "/" + d.Class }

// ID is the fully qualified CDI device ID the kubelet passes to the
// runtime: "vendor/class=device".
func (d Dir) ID(device string) string { return d.Kind() + "=" + device }

// SpecPath is the file holding the devices prepared for one claim. The
// claim UID in the name lets unprepare find it without any other state.
func (d Dir) SpecPath(claimUID string) string {
	return filepath.Join(d.Path, d.Vendor+"-"+claimUID+".json")
}

// Write replaces the claim's spec file. The file appears atomically
// (write, then rename), because runtimes watch the directory and would
// otherwise read a half-written spec.
func (d Dir) Write(claimUID string, devices []Device) error {
	data, err := json.Marshal(Spec{Version: Version, Kind: d.Kind(), Devices: devices})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.Path, ".tmp-"+claimUID+"-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), d.SpecPath(claimUID)); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}

// Remove deletes the claim's spec file; a missing file is not an error,
// since unprepare may be repeated.
func (d Dir) Remove(claimUID string) error {
	err := os.Remove(d.SpecPath(claimUID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Read loads a spec file, for tests and for checking a node by hand.
func Read(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
