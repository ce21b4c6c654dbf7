package controlplane

import (
	"net"
	"path/filepath"

	"draxr.dev/draxr/test/proc"
)

// startProcess starts a component with its log in the control plane's
// folder; detached ones outlive the test binary (make cluster-up).
func (cp *ControlPlane) startProcess(name, binary string, args ...string) (*proc.Process, error) {
	logPath := filepath.Join(cp.Dir, name+".log")
	if cp.detached {
		return proc.StartDetached(name, binary, logPath, args...)
	}
	return proc.Start(name, binary, logPath, args...)
}

// FreePort asks the kernel for an unused port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
