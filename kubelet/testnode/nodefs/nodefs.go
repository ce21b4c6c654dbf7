// Package nodefs names the files a draxr test node keeps under its kubelet
// root directory, so the node and the tests reading them agree without
// tests linking the kubelet.
package nodefs

import (
	"path/filepath"

	"draxr.dev/draxr/kubelet/driver"
)

// RecordFile is where the node's runtime records created containers; read
// it with recordingcri.Load.
func RecordFile(rootDir string) string { return filepath.Join(rootDir, "containers.jsonl") }

// DriverCDIDir is where the node's in-process driver writes CDI specs.
func DriverCDIDir(rootDir string) string { return filepath.Join(rootDir, "cdi") }

// DriverStateFile is where a driver on the node remembers prepared claims.
func DriverStateFile(rootDir, driverName string) string {
	return filepath.Join(driver.PathsUnder(rootDir, driverName).PluginDir, "prepared-claims.json")
}
