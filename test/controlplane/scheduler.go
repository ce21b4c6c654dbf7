package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"draxr.dev/draxr/test/proc"
)

// SchedulerOptions configure StartScheduler.
type SchedulerOptions struct {
	Binary string // draxr-scheduler
	Config string // KubeSchedulerConfiguration (scheduler/deploy/scheduler-config.yaml)
	RBAC   string // manifests that create the ServiceAccount and its roles
	// ServiceAccount the scheduler authenticates as (namespace/name).
	ServiceAccount string
	// ProfileName renames the config's single profile when set, so a
	// second scheduler can serve another schedulerName.
	ProfileName string
	Name        string // process and log name; "draxr-scheduler" if empty
	// Args are added to the scheduler's (e.g. --feature-gates).
	Args []string
}

// StartScheduler applies the RBAC manifests, mints a token for the
// scheduler's ServiceAccount and starts the scheduler with it: the
// scheduler never runs as an admin.
func (cp *ControlPlane) StartScheduler(ctx context.Context, opts SchedulerOptions) (stop func(), err error) {
	if opts.Name == "" {
		opts.Name = "draxr-scheduler"
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, opts.Name, opts.RBAC, opts.ServiceAccount)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(cp.Dir, opts.Name+"-config.yaml")
	if err := writeSchedulerConfig(opts.Config, cfgPath, kubeconfig, opts.ProfileName); err != nil {
		return nil, err
	}
	p, err := cp.startProcess(opts.Name, opts.Binary, append([]string{"--config=" + cfgPath, "--secure-port=0", "--v=2"}, opts.Args...)...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	// The scheduler is up once it logs that it serves; until then pods wait.
	if err := waitFor(ctx, p, 60*time.Second, func() error {
		if strings.Contains(p.LogTail(1<<20), "Attempting to acquire leader lease") ||
			strings.Contains(p.LogTail(1<<20), "Starting Kubernetes Scheduler") {
			return nil
		}
		return fmt.Errorf("%s has not started yet", opts.Name)
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, p.LogTail(3000))
	}
	return func() { p.Stop(10 * time.Second) }, nil
}

// ServiceAccountKubeconfig applies the RBAC manifests and writes a
// kubeconfig with a token of the ServiceAccount (namespace/name).
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, name, rbac, serviceAccount string) (string, error) {
	if err := cp.Apply(ctx, rbac); err != nil {
		return "", err
	}
	ns, sa, _ := strings.Cut(serviceAccount, "/")
	token, err := cp.ServiceAccountToken(ctx, ns, sa)
	if err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(cp.Dir, name+".kubeconfig")
	return kubeconfig, WriteKubeconfig(kubeconfig, cp.URL, cp.AdminConfig.CAData, token)
}

// StartProcess starts a binary whose log goes to the control plane's
// folder; Stop stops it with the rest.
func (cp *ControlPlane) StartProcess(name, binary string, args ...string) (*proc.Process, error) {
	p, err := cp.startProcess(name, binary, args...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

// ServiceAccountToken mints a token through the TokenRequest API.
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600 * 6)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// writeSchedulerConfig copies the shipped configuration, pointing it at
// the kubeconfig and turning leader election off for a single instance.
func writeSchedulerConfig(src, dst, kubeconfig, profileName string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 100, "burst": 200}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	if profileName != "" {
		profiles, _ := cfg["profiles"].([]any)
		if len(profiles) != 1 {
			return fmt.Errorf("%s: want one profile to rename, found %d", src, len(profiles))
		}
		profiles[0].(map[string]any)["schedulerName"] = profileName
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, out, 0o600)
}
