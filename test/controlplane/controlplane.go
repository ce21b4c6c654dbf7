// Package controlplane starts a real Kubernetes control plane on 127.0.0.1
// for end-to-end tests: etcd, kube-apiserver and kube-controller-manager
// built from the versions pinned in go.mod (make controlplane), and
// optionally draxr-scheduler running under its own ServiceAccount. Nodes
// are plain Node objects made Ready by the harness; there is no kubelet.
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"draxr.dev/draxr/test/auditlog"
	"draxr.dev/draxr/test/proc"
)

// DefaultControllers are the controllers draxr's tests rely on: claims
// created from templates, garbage collection of pod-owned claims, and
// ServiceAccounts with their tokens and root CA.
func DefaultControllers() []string {
	return []string{
		"resourceclaim-controller", "garbage-collector-controller", "serviceaccount-controller",
		"serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
		"replicaset-controller", "deployment-controller", "job-controller", "disruption-controller",
		"pod-garbage-collector-controller",
	}
}

// Options configure Start.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	BinDir string
	// Dir is the working directory (data, keys, logs); a temp dir if empty.
	Dir string
	// Controllers for kube-controller-manager; DefaultControllers if nil.
	Controllers []string
	// Detach leaves the processes running when this process exits, for
	// people who want a cluster to poke at (make cluster-up).
	Detach bool
	// APIServerArgs are added to kube-apiserver's (e.g. an audit log).
	APIServerArgs []string
	// ControllerManagerArgs are added to kube-controller-manager's.
	ControllerManagerArgs []string
	// AuditPolicy, when set, is the API server's audit policy (a file);
	// the log is AuditLog, in JSON lines.
	AuditPolicy string
	// AuditUsers, when AuditPolicy is empty, log these users' requests
	// (and no one else's) at Metadata level: auditlog.Policy.
	AuditUsers []string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Dir             string
	AdminKubeconfig string
	AdminConfig     *rest.Config
	Client          kubernetes.Interface
	URL             string

	// AuditLog is the API server's audit log when Options.AuditPolicy is set.
	AuditLog string

	procs    []*proc.Process
	ownsDir  bool
	detached bool // Options.Detach
	// apiServer is how the API server was started, for RestartAPIServer.
	apiServer  []string
	apiServerN int
}

const adminToken = "draxr-e2e-admin-token"

// Start brings up etcd, kube-apiserver and kube-controller-manager and
// waits until the API server is ready. On error everything started is
// stopped.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	cp = &ControlPlane{Dir: opts.Dir, detached: opts.Detach}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "draxr-controlplane-"); err != nil {
			return nil, err
		}
		cp.ownsDir = true
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, cp.logs())
			cp.Stop()
		}
	}()
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not built (run make controlplane): %w", bin, err)
		}
	}
	if opts.AuditPolicy == "" && len(opts.AuditUsers) > 0 {
		opts.AuditPolicy = filepath.Join(cp.Dir, "audit-policy.yaml")
		if err := os.WriteFile(opts.AuditPolicy, []byte(auditlog.Policy(opts.AuditUsers...)), 0o600); err != nil {
			return nil, err
		}
	}
	etcdURL, err := cp.startEtcd(ctx, opts.BinDir)
	if err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, opts.BinDir, etcdURL, opts.AuditPolicy, opts.APIServerArgs); err != nil {
		return nil, err
	}
	controllers := opts.Controllers
	if controllers == nil {
		controllers = DefaultControllers()
	}
	if err := cp.startControllerManager(opts.BinDir, controllers, opts.ControllerManagerArgs); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context, binDir string) (string, error) {
	clientPort, err := FreePort()
	if err != nil {
		return "", err
	}
	peerPort, err := FreePort()
	if err != nil {
		return "", err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := cp.startProcess("etcd", filepath.Join(binDir, "etcd"),
		"--name=e2e", "--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=e2e="+peer, "--log-level=warn", "--quota-backend-bytes=4294967296",
		"--unsafe-no-fsync")
	if err != nil {
		return "", err
	}
	cp.procs = append(cp.procs, p)
	probe := &http.Client{Timeout: 5 * time.Second}
	return client, waitFor(ctx, p, 60*time.Second, func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
		return answersOK(probe, req, "etcd /health")
	})
}

// answersOK is one readiness probe: req must get 200 OK.
func answersOK(c *http.Client, req *http.Request, what string) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", what, resp.Status)
	}
	return nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, binDir, etcdURL, auditPolicy string, extra []string) error {
	keyPath, pubPath, err := writeServiceAccountKeys(cp.Dir)
	if err != nil {
		return err
	}
	tokens := filepath.Join(cp.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	certDir := filepath.Join(cp.Dir, "apiserver")
	args := []string{filepath.Join(binDir, "kube-apiserver"),
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pubPath, "--service-account-signing-key-file=" + keyPath,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false"}
	if auditPolicy != "" {
		cp.AuditLog = filepath.Join(cp.Dir, "audit.log")
		args = append(args, "--audit-policy-file="+auditPolicy, "--audit-log-path="+cp.AuditLog,
			"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0")
	}
	args = append(args, extra...)
	cp.apiServer = args
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := cp.runAPIServer(ctx, "kube-apiserver"); err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return err
	}
	cp.AdminKubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.AdminKubeconfig, cp.URL, ca, adminToken); err != nil {
		return err
	}
	cp.AdminConfig = &rest.Config{Host: cp.URL, BearerToken: adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: 200, Burst: 400}
	cp.Client, err = kubernetes.NewForConfig(cp.AdminConfig)
	return err
}

// runAPIServer starts the API server as startAPIServer set it up and
// waits until it is ready.
func (cp *ControlPlane) runAPIServer(ctx context.Context, name string) error {
	p, err := cp.startProcess(name, cp.apiServer[0], cp.apiServer[1:]...)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return waitFor(ctx, p, 120*time.Second, func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		return answersOK(insecure, req, "kube-apiserver /readyz")
	})
}

// RestartAPIServer stops the API server (SIGTERM, as a rolling upgrade
// would) and starts it again on the same address with the same
// certificates and keys, so every client reconnects; it returns once the
// new one is ready. Each incarnation logs to its own file; logf, when
// set, is told how long the old one took to stop.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, logf func(string)) error {
	for i, p := range cp.procs {
		if p.Name == "kube-apiserver" || strings.HasPrefix(p.Name, "kube-apiserver-") {
			if done, _ := p.Exited(); done {
				continue
			}
			start := time.Now()
			p.Stop(10 * time.Second)
			if logf != nil {
				logf(fmt.Sprintf("  kube-apiserver stopped after %s", time.Since(start).Round(100*time.Millisecond)))
			}
			cp.procs = append(cp.procs[:i], cp.procs[i+1:]...)
			break
		}
	}
	cp.apiServerN++
	return cp.runAPIServer(ctx, fmt.Sprintf("kube-apiserver-%d", cp.apiServerN))
}

func (cp *ControlPlane) startControllerManager(binDir string, controllers, extra []string) error {
	args := append([]string{"--kubeconfig=" + cp.AdminKubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + filepath.Join(cp.Dir, "sa.key"),
		"--root-ca-file=" + filepath.Join(cp.Dir, "apiserver", "apiserver.crt"),
		"--use-service-account-credentials=false",
		"--leader-elect=false", "--secure-port=0",
		"--concurrent-gc-syncs=5"}, extra...)
	p, err := cp.startProcess("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), args...)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

// Stop stops every process the harness started, newest first, by PID, and
// removes the working directory if the harness made it.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].Stop(10 * time.Second)
	}
	cp.procs = nil
	if cp.ownsDir && os.Getenv("DRAXR_KEEP_E2E_DIR") == "" {
		_ = os.RemoveAll(cp.Dir)
	}
}

// Process names a running process of the control plane.
type Process struct {
	Name string
	PID  int
}

// Processes lists the running processes in the order they were started.
func (cp *ControlPlane) Processes() []Process {
	var out []Process
	for _, p := range cp.procs {
		if done, _ := p.Exited(); !done {
			out = append(out, Process{Name: p.Name, PID: p.PID()})
		}
	}
	return out
}

// PIDs lists the running processes, for tests that check cleanup.
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range cp.procs {
		if done, _ := p.Exited(); !done {
			out[p.Name] = p.PID()
		}
	}
	return out
}

func (cp *ControlPlane) logs() string {
	var b strings.Builder
	// A component restarted under the same name writes the same file.
	seen := map[string]bool{}
	for _, p := range cp.procs {
		if seen[p.LogPath] {
			continue
		}
		seen[p.LogPath] = true
		fmt.Fprintf(&b, "\n--- %s log (tail) ---\n%s", p.Name, p.LogTail(3000))
	}
	return b.String()
}

// Logs returns the tail of every component's log.
func (cp *ControlPlane) Logs() string { return cp.logs() }

// waitFor polls check until it passes, the process dies, or timeout.
func waitFor(ctx context.Context, p *proc.Process, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited: %v", p.Name, err)
		}
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %w", p.Name, timeout, last)
}

func writeServiceAccountKeys(dir string) (string, string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	err = errors.Join(
		os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600),
		os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644))
	return keyPath, pubPath, err
}

// WriteKubeconfig writes a kubeconfig for a bearer token.
func WriteKubeconfig(path, server string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "user"}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

// Attach returns the control plane a detached Start left running in dir
// (make cluster-up), for commands that add to it later: processes it
// starts are detached too, and Stop stops none of the earlier ones.
func Attach(dir string) (*ControlPlane, error) {
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("no control plane in %s: %w", dir, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &ControlPlane{Dir: dir, AdminKubeconfig: kubeconfig, AdminConfig: cfg, Client: client, URL: cfg.Host, detached: true}, nil
}
