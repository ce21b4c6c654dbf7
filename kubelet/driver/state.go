package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// State is what the driver remembers across restarts: every claim it
// prepared and not yet unprepared. The kubelet may ask to unprepare a
// claim that a previous driver process prepared, after the claim object
// is gone, so this file is the only record of which devices to release.
type State struct {
	Claims map[types.UID]PreparedClaim `json:"claims"`
}

// PreparedClaim is one prepared ResourceClaim.
type PreparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []PreparedDevice `json:"devices"`
}

// PreparedDevice is one allocated device of a prepared claim and the CDI
// device ID the kubelet hands to the containers of its request.
type PreparedDevice struct {
	Request     string `json:"request"`
	Pool        string `json:"pool"`
	Device      string `json:"device"`
	CDIDeviceID string `json:"cdiDeviceID"`
}

// LoadState reads a state file; a missing file is an empty state (first
// start on this node).
func LoadState(path string) (State, error) {
	st := State{Claims: map[types.UID]PreparedClaim{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("state file %s: %w", path, err)
	}
	if st.Claims == nil {
		st.Claims = map[types.UID]PreparedClaim{}
	}
	return st, nil
}

// save writes the state atomically, so a crash mid-write leaves the old
// state rather than a truncated file the next start cannot read.
func (st State) save(path string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (st State) clone() State {
	out := State{Claims: make(map[types.UID]PreparedClaim, len(st.Claims))}
	for uid, c := range st.Claims {
		c.Devices = append([]PreparedDevice(nil), c.Devices...)
		out.Claims[uid] = c
	}
	return out
}
