// Package kueue runs the real Kueue controller manager (v0.17.0, built by
// make kueue from test/tools/kueue) against a test control plane: its
// CRDs from its module, a configuration for one process on 127.0.0.1
// (no leader election, no webhook configurations in the API server, the
// batch/v1 Job integration), and the process itself.
package kueue

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/test/controlplane"
	"draxr.dev/draxr/test/proc"
)

// CRDNames are the CRDs Kueue's manager watches at start-up (it exits
// without them).
func CRDNames() []string {
	return []string{"admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
		"provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads"}
}

// Binary runs make kueue in root (a no-op when built) and returns the
// binary's path.
func Binary(root string) (string, error) {
	if out, err := exec.Command("make", "-s", "-C", root, "kueue").CombinedOutput(); err != nil {
		return "", fmt.Errorf("make kueue: %v\n%s", err, out)
	}
	out, err := exec.Command("make", "-s", "-C", root, "print-kueue-bin").Output()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, strings.TrimSpace(string(out))), nil
}

// moduleDir is Kueue's module in the module cache, as the tool module
// pins it.
func moduleDir(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue")
	cmd.Dir = filepath.Join(root, "test", "tools", "kueue")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate sigs.k8s.io/kueue: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Options are what a run of the manager may add to the configuration.
type Options struct {
	// DeviceClassMappings charge claim-template pods' devices to quota
	// under a resource name (Kueue's resources.deviceClassMappings, read
	// only with its DynamicResourceAllocation gate, which they turn on).
	DeviceClassMappings []DeviceClassMapping
}

// DeviceClassMapping is one entry of Kueue's resources.deviceClassMappings.
type DeviceClassMapping struct {
	Name             string   // the resource name a ClusterQueue's quota names
	DeviceClassNames []string // DeviceClasses whose devices count as Name
}

// config is the manager's configuration: health, metrics and webhook
// ports, the certificate folder, and opts.
func (o Options) config(health, metrics, webhook int, certs string) []byte {
	c := fmt.Appendf(nil, configTemplate, health, metrics, webhook, certs)
	if len(o.DeviceClassMappings) == 0 {
		return c
	}
	c = append(c, "  DynamicResourceAllocation: true\nresources:\n  deviceClassMappings:\n"...)
	for _, m := range o.DeviceClassMappings {
		c = fmt.Appendf(c, "  - name: %q\n    deviceClassNames:\n", m.Name)
		for _, n := range m.DeviceClassNames {
			c = fmt.Appendf(c, "    - %q\n", n)
		}
	}
	return c
}

// Start is StartWith with no options: what the end-to-end tests run.
func Start(ctx context.Context, cp *controlplane.ControlPlane, root string) (*proc.Process, error) {
	return StartWith(ctx, cp, root, Options{})
}

// StartWith installs Kueue's CRDs and runs its manager; it is stopped with
// the control plane (cp.Stop) or by the caller. Kueue insists on a
// metrics certificate at a fixed path (/etc/kueue/metrics/certs) when its
// own certificate management is off: the manager runs in a mount
// namespace of its own where /etc is overlaid with that certificate, so
// the host's /etc is never written. That needs root, as CI has.
func StartWith(ctx context.Context, cp *controlplane.ControlPlane, root string, opts Options) (*proc.Process, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	bin, err := Binary(root)
	if err != nil {
		return nil, err
	}
	mod, err := moduleDir(root)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, n := range CRDNames() {
		paths = append(paths, filepath.Join(mod, "config", "components", "crd", "bases", "kueue.x-k8s.io_"+n+".yaml"))
	}
	if err := cp.InstallCRDFiles(ctx, paths...); err != nil {
		return nil, fmt.Errorf("kueue's CRDs: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	dir := filepath.Join(cp.Dir, "kueue")
	certs := filepath.Join(dir, "certs")
	overlay := filepath.Join(dir, "etc-overlay")
	metricsCerts := filepath.Join(overlay, "upper", "kueue", "metrics", "certs")
	for _, d := range []string{certs, metricsCerts, filepath.Join(overlay, "work")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := writeCert(certs); err != nil {
		return nil, err
	}
	if err := writeCert(metricsCerts); err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = controlplane.FreePort(); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, opts.config(ports[0], ports[1], ports[2], certs), 0o600); err != nil {
		return nil, err
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, err
	}
	script := fmt.Sprintf("mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc && exec %s --config=%s --kubeconfig=%s --zap-log-level=2",
		filepath.Join(overlay, "upper"), filepath.Join(overlay, "work"), bin, config, cp.AdminKubeconfig)
	p, err := cp.StartProcess("kueue", unshare, "-m", "--propagation", "private", "sh", "-c", script)
	if err != nil {
		return nil, err
	}
	// /readyz answers before the controllers run: wait for its health
	// port, then let callers wait for the objects they need.
	deadline := time.Now().Add(time.Minute)
	for {
		if exited, werr := p.Exited(); exited {
			return nil, fmt.Errorf("kueue exited: %v\n%s", werr, p.LogTail(4000))
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]), time.Second); err == nil {
			_ = c.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Stop(5 * time.Second)
			return nil, fmt.Errorf("kueue did not listen within a minute\n%s", p.LogTail(4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ErrNotRoot: Kueue's manager needs a mount namespace, and so root.
var ErrNotRoot = errors.New("running Kueue's manager needs root (a mount namespace for its fixed certificate path)")

// configTemplate: health, metrics and webhook ports, certificate folder;
// featureGates last, so that Options.config can add to them.
const configTemplate = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
integrations:
  frameworks:
  - batch/job
featureGates:
  VisibilityOnDemand: false
`

// writeCert writes a self-signed tls.crt and tls.key for 127.0.0.1.
func writeCert(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}
