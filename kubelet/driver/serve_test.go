package driver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// The driver as the kubelet sees it: a registration socket in the
// plugin registry, NodePrepareResources / NodeUnprepareResources over its
// DRA socket, ResourceSlices for the node, and every device healthy.
func TestServeAsKubeletSeesIt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	d := newTestDriver(t, cfg)
	claim := allocated("uid-1", "pod-extended-resources-x", gpu("container-0-request-0", "gpu-1"))
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-uid"}}, claim)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	paths := PathsUnder(filepath.Join(dir, "kubelet"), testDriver)
	running, err := Start(ctx, d, client, paths)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Stop()

	if _, err := os.Stat(filepath.Join(paths.RegistrarDir, testDriver+"-reg.sock")); err != nil {
		t.Errorf("no registration socket for the kubelet: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(paths.PluginDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dra := drapb.NewDRAPluginClient(conn)
	ref := &drapb.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}

	resp, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{ref}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Claims["uid-1"]
	if got == nil || got.Error != "" || len(got.Devices) != 1 {
		t.Fatalf("NodePrepareResources = %v, want one device", resp.Claims)
	}
	if dev := got.Devices[0]; dev.DeviceName != "gpu-1" || !slices.Equal(dev.CdiDeviceIds, []string{"gpu.example.com/gpu=gpu-1"}) ||
		!slices.Equal(dev.RequestNames, []string{"container-0-request-0"}) {
		t.Errorf("prepared device = %v, want gpu-1 as gpu.example.com/gpu=gpu-1 for container-0-request-0", dev)
	}
	spec := filepath.Join(cfg.CDIDir, "gpu.example.com-uid-1.json")
	if _, err := os.Stat(spec); err != nil {
		t.Errorf("no CDI spec after prepare: %v", err)
	}

	if _, err := dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{ref}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(spec); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CDI spec after unprepare: %v", err)
	}

	// The node's pool lists the inventory.
	var devices []string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, nil
		}
		devices = nil
		for _, s := range list.Items {
			if s.Spec.Driver != testDriver || s.Spec.NodeName == nil || *s.Spec.NodeName != "node-a" || s.Spec.Pool.Name != "node-a" {
				t.Fatalf("slice %s: driver %s, node %v, pool %s", s.Name, s.Spec.Driver, s.Spec.NodeName, s.Spec.Pool.Name)
			}
			for _, d := range s.Spec.Devices {
				devices = append(devices, d.Name)
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("no ResourceSlices published: %v", err)
	}
	if !slices.Equal(devices, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}) {
		t.Errorf("published devices %v, want gpu-0..gpu-3", devices)
	}

	stream, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	health, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(health.Devices) != 4 {
		t.Errorf("health for %d devices, want 4", len(health.Devices))
	}
	for _, h := range health.Devices {
		if h.Health != drahealthv1.HealthStatus_HEALTHY || h.Device.PoolName != "node-a" {
			t.Errorf("health %v", h)
		}
	}
}
