package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

func decodeAll(t *testing.T, path string) []runtime.Object {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
}

// The shipped DaemonSet runs a driver that can work: its inventory
// parses, every folder the driver uses (registry, socket, state, CDI) is
// a host folder at the same path, since the kubelet dials the socket path
// the driver registers, the class selects its driver name, and it runs
// as the ServiceAccount the RBAC manifest grants.
func TestDaemonSetMatchesDriver(t *testing.T) {
	var (
		ds    *appsv1.DaemonSet
		cm    *corev1.ConfigMap
		class *resourceapi.DeviceClass
		sa    *corev1.ServiceAccount
	)
	for _, file := range []string{"daemonset.yaml", "deviceclass.yaml", "rbac.yaml"} {
		for _, obj := range decodeAll(t, filepath.Join("..", "..", "deploy", file)) {
			switch o := obj.(type) {
			case *appsv1.DaemonSet:
				ds = o
			case *corev1.ConfigMap:
				cm = o
			case *resourceapi.DeviceClass:
				class = o
			case *corev1.ServiceAccount:
				sa = o
			case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			default:
				t.Fatalf("%s: unexpected %T", file, obj)
			}
		}
	}
	if ds == nil || cm == nil || class == nil || sa == nil {
		t.Fatal("manifests lack the DaemonSet, its inventory ConfigMap, the DeviceClass or the ServiceAccount")
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name || ds.Namespace != sa.Namespace {
		t.Errorf("DaemonSet runs as %s/%s, RBAC grants %s/%s", ds.Namespace, pod.ServiceAccountName, sa.Namespace, sa.Name)
	}
	c := pod.Containers[0]

	// Mount the inventory where the container would see it.
	mounts := map[string]string{} // mount path -> host path ("" for others)
	tmp := t.TempDir()
	args := append([]string(nil), c.Args...)
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.HostPath != nil:
				mounts[m.MountPath] = v.HostPath.Path
			case v.ConfigMap != nil && v.ConfigMap.Name == cm.Name:
				for key, data := range cm.Data {
					if err := os.WriteFile(filepath.Join(tmp, key), []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				for i := range args {
					args[i] = strings.Replace(args[i], m.MountPath, tmp, 1)
				}
			}
		}
	}
	t.Setenv("NODE_NAME", "node-a")
	o, err := parse(flag.NewFlagSet("test", flag.ContinueOnError), args)
	if err != nil {
		t.Fatalf("DaemonSet args %v: %v", c.Args, err)
	}
	devices, err := o.cfg.Inventory.Devices()
	if err != nil || len(devices) == 0 {
		t.Fatalf("inventory: %d devices, %v", len(devices), err)
	}
	for what, path := range map[string]string{
		"plugin registry": o.paths.RegistrarDir, "DRA socket folder": o.paths.PluginDir,
		"state file folder": filepath.Dir(o.cfg.StateFile), "CDI folder": o.cfg.CDIDir,
	} {
		host, ok := mounts[path]
		if !ok || host != path {
			t.Errorf("%s %s is not the host folder at the same path (mounts %v)", what, path, mounts)
		}
	}
	var env bool
	for _, e := range c.Env {
		env = env || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	if !env {
		t.Error("NODE_NAME does not come from spec.nodeName")
	}
	if sel := class.Spec.Selectors; len(sel) != 1 || sel[0].CEL == nil || !strings.Contains(sel[0].CEL.Expression, `"`+o.cfg.DriverName+`"`) {
		t.Errorf("DeviceClass %s selectors %+v do not select driver %s", class.Name, sel, o.cfg.DriverName)
	}
}
