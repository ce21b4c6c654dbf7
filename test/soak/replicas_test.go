package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/proc"
	"draxr.dev/draxr/test/soak/checker"
)

// replica is one of the two draxr-autoscaler replicas; each start is a
// new process with its own log.
type replica struct {
	name    string
	addr    string
	p       *proc.Process
	started time.Time
	starts  int
	// stopping: the soak ended this process on purpose.
	stopping bool
}

// replicas runs the two replicas, restarting one that exits on its own
// (a leader that lost its lease exits, as CA's does).
type replicas struct {
	cp   *controlplane.ControlPlane
	args []string
	obs  *observer
	logf func(format string, args ...any)

	mu   sync.Mutex
	all  []*replica
	logs []string // every incarnation's log, scanned at the end
}

func (r *replicas) start(name string) (*replica, error) {
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	rep := &replica{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	r.mu.Lock()
	r.all = append(r.all, rep)
	r.mu.Unlock()
	return rep, r.launch(rep)
}

func (r *replicas) launch(rep *replica) error {
	r.mu.Lock()
	rep.starts++
	procName := fmt.Sprintf("draxr-autoscaler-%s-%d", rep.name, rep.starts)
	r.mu.Unlock()
	args := append(append([]string{}, r.args...), "--address="+rep.addr)
	p, err := r.cp.StartProcess(procName, filepath.Join(bins, "draxr-autoscaler"), args...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	rep.p, rep.started, rep.stopping = p, time.Now(), false
	r.logs = append(r.logs, p.LogPath)
	r.mu.Unlock()
	return nil
}

// byHolder finds the replica whose process holds the lease (holder
// identities end in _PID).
func (r *replicas) byHolder(holder string) *replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.all {
		if rep.p != nil && holder == fmt.Sprintf("%s_%d", hostname(), rep.p.PID()) {
			return rep
		}
	}
	return nil
}

func (r *replicas) other(rep *replica) *replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.all {
		if o != rep {
			return o
		}
	}
	return nil
}

// kill ends the replica's process (SIGKILL, or SIGTERM when graceful)
// and starts it again after pause.
func (r *replicas) kill(rep *replica, graceful bool, pause time.Duration) error {
	r.mu.Lock()
	rep.stopping = true
	p := rep.p
	r.mu.Unlock()
	if graceful {
		p.Stop(20 * time.Second)
	} else {
		p.Kill()
	}
	time.Sleep(pause)
	return r.launch(rep)
}

// supervise restarts replicas that exit on their own, and probes each
// running one's /health-check every second.
func (r *replicas) supervise(ctx context.Context) {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		r.mu.Lock()
		reps := append([]*replica(nil), r.all...)
		r.mu.Unlock()
		for _, rep := range reps {
			r.mu.Lock()
			p, stopping, started := rep.p, rep.stopping, rep.started
			r.mu.Unlock()
			if done, err := p.Exited(); done {
				if !stopping {
					r.logf("replica %s (pid %d) exited on its own: %v; restarting", rep.name, p.PID(), err)
					if err := r.launch(rep); err != nil {
						r.logf("restart %s: %v", rep.name, err)
					}
				}
				continue
			}
			ok, detail := probe(ctx, client, rep.addr)
			if done, _ := p.Exited(); done || ctx.Err() != nil {
				continue
			}
			r.obs.send(checker.Observation{Kind: checker.HealthProbe,
				Probe: &checker.Probe{Replica: rep.name, OK: ok, Detail: detail, Age: time.Since(started)}})
		}
	}
}

func probe(ctx context.Context, c *http.Client, addr string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health-check", nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%s: %s", resp.Status, body)
}

// stopAll stops every replica (SIGTERM) and returns their logs' paths.
func (r *replicas) stopAll() []string {
	r.mu.Lock()
	reps := append([]*replica(nil), r.all...)
	for _, rep := range reps {
		rep.stopping = true
	}
	r.mu.Unlock()
	for _, rep := range reps {
		rep.p.Stop(20 * time.Second)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.logs...)
}
