package recordingcri

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// What the kubelet sends over CRI is what the record shows, per pod and
// container; an init container (whatever its command) and a container
// whose command is "true" exit 0 at once, others keep running.
func TestRecordsCDIDevicesPerContainer(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "containers.jsonl")
	isInit := func(namespace, pod, container string) bool {
		return namespace == "ns" && pod == "pod" && container == "init-sleep"
	}
	rt, err := Start(filepath.Join(dir, "cri.sock"), record, isInit)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(rt.Endpoint()).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(noopoteltrace.NewTracerProvider()).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sandboxCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod", Namespace: "ns", Uid: "pod-uid"}}
	sandbox, err := client.RunPodSandbox(ctx, sandboxCfg, "")
	if err != nil {
		t.Fatal(err)
	}

	containers := []struct {
		name    string
		command []string
		cdi     []string
		state   runtimeapi.ContainerState
	}{
		{name: "setup", command: []string{"true"}, cdi: []string{"gpu.example.com/gpu=gpu-0"}, state: runtimeapi.ContainerState_CONTAINER_EXITED},
		{name: "init-sleep", command: []string{"sleep", "3600"}, state: runtimeapi.ContainerState_CONTAINER_EXITED},
		{name: "one", cdi: []string{"gpu.example.com/gpu=gpu-0"}, state: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{name: "two", state: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{name: "three", cdi: []string{"gpu.example.com/gpu=gpu-1", "nic.example.com/nic=nic-0"}, state: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}
	for _, c := range containers {
		cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: c.name}, Image: &runtimeapi.ImageSpec{Image: "app"}, Command: c.command}
		for _, id := range c.cdi {
			cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: id})
		}
		id, err := client.CreateContainer(ctx, sandbox, cfg, sandboxCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		st, err := client.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.State != c.state || st.Status.ExitCode != 0 {
			t.Errorf("container %s: state %s exit %d, want %s", c.name, st.Status.State, st.Status.ExitCode, c.state)
		}
	}

	got, err := Load(record)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(containers) {
		t.Fatalf("recorded %d containers, want %d: %+v", len(got), len(containers), got)
	}
	for i, c := range containers {
		r := got[i]
		if r.Namespace != "ns" || r.Pod != "pod" || r.PodUID != "pod-uid" || r.Name != c.name || !slices.Equal(r.CDIDevices, append([]string{}, c.cdi...)) {
			t.Errorf("record %d = %+v, want ns/pod container %s with %v", i, r, c.name, c.cdi)
		}
	}
}
