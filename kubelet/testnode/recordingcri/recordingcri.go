// Package recordingcri is the container runtime of draxr's test nodes: the
// CRI fake runtime from k8s.io/cri-client served over a real gRPC socket,
// which also writes down, for every container the kubelet creates, the
// CDI device IDs in the CreateContainer request. The fake itself drops
// them, and they are what a real runtime would inject, so they are the
// node-side result tests check.
package recordingcri

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeremote "k8s.io/cri-client/pkg/fake"
)

// Container is one CreateContainer call as the runtime received it.
type Container struct {
	Namespace  string   `json:"namespace"`
	Pod        string   `json:"pod"`
	PodUID     string   `json:"podUID"`
	Name       string   `json:"name"`
	Attempt    uint32   `json:"attempt"`
	CDIDevices []string `json:"cdiDevices"`
}

// Runtime is a running fake runtime.
type Runtime struct {
	fake   *fakeremote.RemoteRuntime
	server *grpc.Server
	socket string

	runsToCompletion RunsToCompletion

	mu        sync.Mutex
	record    *os.File
	finishing map[string]bool // container IDs that exit as soon as started
	stop      chan struct{}
}

// RunsToCompletion says whether a pod's container is one that exits on its
// own (a non-sidecar init container): the fake runtime has no process to
// wait for, so such a container exits 0 as soon as it starts. nil: only
// containers whose command is "true" do.
type RunsToCompletion func(namespace, pod, container string) bool

// Start serves the runtime and image services on a unix socket and
// appends every created container to recordPath (JSON lines).
func Start(socket, recordPath string, runsToCompletion RunsToCompletion) (*Runtime, error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	record, err := os.OpenFile(recordPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		l.Close()
		return nil, err
	}
	r := &Runtime{
		fake: fakeremote.NewFakeRemoteRuntime(), server: grpc.NewServer(), socket: socket,
		record: record, finishing: map[string]bool{}, stop: make(chan struct{}), runsToCompletion: runsToCompletion,
	}
	r.fake.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true},
	}}
	runtimeapi.RegisterRuntimeServiceServer(r.server, &service{RemoteRuntime: r.fake, r: r})
	runtimeapi.RegisterImageServiceServer(r.server, r.fake)
	go func() { _ = r.server.Serve(l) }()
	go r.trimCallLog()
	return r, nil
}

// Endpoint is the CRI endpoint for the kubelet.
func (r *Runtime) Endpoint() string { return "unix://" + r.socket }

// Stop stops serving and closes the record.
func (r *Runtime) Stop() {
	close(r.stop)
	r.server.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.record.Close()
}

// trimCallLog empties the fake's list of calls now and then: the kubelet
// polls the runtime every second, and the fake keeps every call name
// forever, which a long scale run would notice.
func (r *Runtime) trimCallLog() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			rs := r.fake.RuntimeService
			rs.Lock()
			rs.Called = nil
			rs.Unlock()
		}
	}
}

// service overrides the two calls the recording needs and inherits the
// rest of the fake.
type service struct {
	*fakeremote.RemoteRuntime
	r *Runtime
}

func (s *service) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	resp, err := s.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.r.add(req, resp.ContainerId); err != nil {
		return nil, fmt.Errorf("record container: %w", err)
	}
	return resp, nil
}

// StartContainer starts the container; an init container (see
// RunsToCompletion) or one whose command is "true" exits with code 0 right
// away, as it would on a real node. Without that, init containers would
// run forever on a fake runtime and the pod's main containers would never
// be created.
func (s *service) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	resp, err := s.RemoteRuntime.StartContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	s.r.mu.Lock()
	finish := s.r.finishing[req.ContainerId]
	delete(s.r.finishing, req.ContainerId)
	s.r.mu.Unlock()
	if finish {
		rs := s.RuntimeService
		rs.Lock()
		if c, ok := rs.Containers[req.ContainerId]; ok {
			c.State, c.ExitCode, c.Reason, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed", time.Now().UnixNano()
		}
		rs.Unlock()
	}
	return resp, nil
}

func (r *Runtime) add(req *runtimeapi.CreateContainerRequest, id string) error {
	cfg, sandbox := req.GetConfig(), req.GetSandboxConfig().GetMetadata()
	c := Container{
		Namespace: sandbox.GetNamespace(), Pod: sandbox.GetName(), PodUID: sandbox.GetUid(),
		Name: cfg.GetMetadata().GetName(), Attempt: cfg.GetMetadata().GetAttempt(), CDIDevices: []string{},
	}
	for _, d := range cfg.GetCDIDevices() {
		c.CDIDevices = append(c.CDIDevices, d.GetName())
	}
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	cmd := cfg.GetCommand()
	finishes := slices.Equal(cmd, []string{"true"}) || slices.Equal(cmd, []string{"/bin/true"}) ||
		(r.runsToCompletion != nil && r.runsToCompletion(c.Namespace, c.Pod, c.Name))
	r.mu.Lock()
	defer r.mu.Unlock()
	if finishes {
		r.finishing[id] = true
	}
	// One write per line on an O_APPEND file, so lines never interleave.
	_, err = r.record.Write(append(line, '\n'))
	return err
}

// Load reads a record file: every container created so far, oldest
// first. A last line still being written is left out.
func Load(recordPath string) ([]Container, error) {
	data, err := os.ReadFile(recordPath)
	if err != nil {
		return nil, err
	}
	var out []Container
	for {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		if !complete {
			return out, nil
		}
		var c Container
		if err := json.Unmarshal(line, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", recordPath, err)
		}
		out = append(out, c)
		data = rest
	}
}
