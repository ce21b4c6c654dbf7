// Package proc starts the child processes tests bring up (control-plane
// components, test nodes, drivers): each in its own process group, its
// output in a log file, stopped by PID, and killed with its parent unless
// started detached.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a started child process.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Start starts binary with args, its output going to logPath.
func Start(name, binary, logPath string, args ...string) (*Process, error) {
	return start(false, name, binary, logPath, args...)
}

// StartDetached is Start for a process that outlives its parent
// (make cluster-up).
func StartDetached(name, binary, logPath string, args ...string) (*Process, error) {
	return start(true, name, binary, logPath, args...)
}

func start(detached bool, name, binary, logPath string, args ...string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o750); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so Stop reaches everything it spawns; SIGKILL
	// when the parent dies, so a test killed on timeout leaves no node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if detached {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group and SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if done, _ := p.Exited(); done {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill kills the process group at once, as a crash would.
func (p *Process) Kill() {
	if done, _ := p.Exited(); done {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.done
}

// LogTail returns the last n bytes of the log.
func (p *Process) LogTail(n int64) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	return string(data[max(int64(len(data))-n, 0):])
}
