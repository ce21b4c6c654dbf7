package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"draxr.dev/draxr/autoscaler/core"
	"draxr.dev/draxr/cloudprovider/local"
	"draxr.dev/draxr/simulator/nodegroup"
	egsvc "draxr.dev/draxr/test/externalgrpc"
	"draxr.dev/draxr/test/proc"
)

// grpcProvider serves the groups over CA's externalgrpc protocol on
// 127.0.0.1 (the test's provider service: Node objects and their
// ResourceSlices in the control plane), with mTLS when certs is set, and
// writes draxr-autoscaler's --cloud-config for it with the client
// certificate cert and key.
func (e *env) grpcProvider(certs *egsvc.Certs, cert, key string, groups ...groupSpec) (*egsvc.Service, string) {
	e.t.Helper()
	var ngs []*nodegroup.NodeGroup
	for _, ng := range e.nodeGroupObjects(groups...) {
		ngs = append(ngs, &ng)
	}
	lp, err := local.New(local.Options{Client: cp.Client, Groups: ngs, NodeReadyDelay: time.Second, SlicesDelay: time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	svc := egsvc.New(lp, egsvc.Options{})
	cfg := ""
	var addr string
	var stop func()
	if certs != nil {
		creds, err := certs.ServerCreds()
		if err != nil {
			e.t.Fatal(err)
		}
		addr, stop, err = svc.Start(creds)
		if err != nil {
			e.t.Fatal(err)
		}
		cfg = fmt.Sprintf("address: %q\ncert: %s\nkey: %s\ncacert: %s\ngrpc_timeout: 5s\n", addr, cert, key, certs.CA)
	} else {
		addr, stop, err = svc.Start(nil)
		if err != nil {
			e.t.Fatal(err)
		}
		cfg = fmt.Sprintf("address: %q\n", addr)
	}
	e.t.Cleanup(stop)
	path := filepath.Join(e.t.TempDir(), "cloud-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return svc, path
}

func (e *env) externalGRPCAutoscaler(cloudConfig string, extra ...string) (*proc.Process, string) {
	e.t.Helper()
	return e.autoscalerBinary("draxr-autoscaler", "", append([]string{"--cloud-provider=externalgrpc", "--cloud-config=" + cloudConfig}, extra...)...)
}

// draxr-autoscaler with --cloud-provider=externalgrpc, over mTLS, scales
// a DRA group from zero: the service's template carries no node to copy,
// so its slices come through the resourceSlices field; the pods go and
// the group shrinks back to its min size.
func TestExternalGRPCScalesDRAGroup(t *testing.T) {
	e := newEnv(t, "egdra")
	e.class("egdra-gpu", e.driver, e.resource)
	certs, err := egsvc.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc, cfg := e.grpcProvider(certs, certs.ClientCert, certs.ClientKey, groupSpec{name: "egdra-gpu", min: 1, max: 4, draDevices: 8})
	_, addr := e.externalGRPCAutoscaler(cfg)
	e.replicaSet("train", 12, e.resource, 1)
	perNode := e.waitPodsBound(12, 90*time.Second)
	if len(perNode) != 2 {
		t.Fatalf("pods per node = %v, want 2 nodes", perNode)
	}
	// The provider reads Nodes and slices through the autoscaler's
	// informers: steady loops send no LIST (the audit log).
	e.noListsWhile(addr, 3, func() {
		e.consistently(3*time.Second, "no further scale-up", func() error {
			if n := len(e.groupNodes("egdra-gpu")); n != 2 {
				return fmt.Errorf("group has %d nodes, want 2", n)
			}
			return nil
		})
	})
	if n := svc.Calls("NodeGroupIncreaseSize"); n < 1 {
		t.Errorf("NodeGroupIncreaseSize called %d times", n)
	}
	if s, _, err := e.status(); err != nil {
		t.Error(err)
	} else if len(s.NodeGroups) != 1 || s.NodeGroups[0].Name != "egdra-gpu" || s.NodeGroups[0].Health.CloudProviderTarget != 2 {
		t.Errorf("status node groups = %+v, want egdra-gpu with target 2", s.NodeGroups)
	}
	e.scaleReplicaSet("train", 0)
	e.eventually(60*time.Second, "scale down to min size 1", func() error {
		if n := len(e.groupNodes("egdra-gpu")); n != 1 {
			return fmt.Errorf("group has %d nodes", n)
		}
		return nil
	})
	if n := svc.Calls("NodeGroupDeleteNodes"); n < 1 {
		t.Errorf("NodeGroupDeleteNodes called %d times", n)
	}
}

// A service that cannot grow the group (ResourceExhausted) backs it off:
// the status shows the group in backoff with the service's code and
// message, and an event says the scale-up failed. Once the service can
// grow it again, the pods are served after the backoff.
func TestExternalGRPCServiceErrorBacksOff(t *testing.T) {
	e := newEnv(t, "egfail")
	e.class("egfail-gpu", e.driver, e.resource)
	svc, cfg := e.grpcProvider(nil, "", "", groupSpec{name: "egfail-gpu", max: 3, draDevices: 8})
	svc.SetFault("NodeGroupIncreaseSize", status.Error(codes.ResourceExhausted, "no egfail machines left in zone-a"))
	e.externalGRPCAutoscaler(cfg, "--initial-node-group-backoff-duration=3s", "--max-node-group-backoff-duration=3s")
	e.replicaSet("train", 2, e.resource, 1)
	e.eventually(30*time.Second, "the group in backoff in the status", func() error {
		s, _, err := e.status()
		if err != nil {
			return err
		}
		for _, g := range s.NodeGroups {
			if g.Name == "egfail-gpu" && g.ScaleUp.Status == core.StatusBackoff {
				if g.ScaleUp.BackoffInfo.ErrorCode != "ResourceExhausted" || !strings.Contains(g.ScaleUp.BackoffInfo.ErrorMessage, "no egfail machines left in zone-a") {
					return fmt.Errorf("backoff info %+v, want the service's code and message", g.ScaleUp.BackoffInfo)
				}
				return nil
			}
		}
		return fmt.Errorf("no egfail-gpu in backoff: %+v", s.NodeGroups)
	})
	e.eventually(10*time.Second, "a FailedToScaleUpGroup event", func() error {
		events, err := cp.Client.CoreV1().Events("kube-system").List(e.ctx, metav1.ListOptions{
			FieldSelector: "reason=FailedToScaleUpGroup,involvedObject.name=draxr-autoscaler-status-" + e.name})
		if err != nil {
			return err
		}
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, "egfail-gpu") && strings.Contains(ev.Message, "no egfail machines left") {
				return nil
			}
		}
		return fmt.Errorf("%d FailedToScaleUpGroup events, none naming egfail-gpu and the service's message", len(events.Items))
	})
	if n := len(e.groupNodes("egfail-gpu")); n != 0 {
		t.Fatalf("group has %d nodes after failed scale-ups", n)
	}
	svc.SetFault("NodeGroupIncreaseSize", nil)
	e.waitPodsBound(2, 60*time.Second)
}

// A client certificate the service's CA did not sign is refused: the
// autoscaler creates nothing and its log says why and what to check.
func TestExternalGRPCWrongCertificateRefused(t *testing.T) {
	e := newEnv(t, "egtls")
	e.class("egtls-gpu", e.driver, e.resource)
	certs, err := egsvc.NewCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc, cfg := e.grpcProvider(certs, certs.WrongCert, certs.WrongKey, groupSpec{name: "egtls-gpu", max: 3, draDevices: 8})
	p, _ := e.externalGRPCAutoscaler(cfg)
	e.replicaSet("train", 1, e.resource, 1)
	const want = "externalgrpc provider: Refresh: service unreachable"
	e.eventually(30*time.Second, "the refusal in the autoscaler's log", func() error {
		if log := p.LogTail(20000); !strings.Contains(log, want) || !strings.Contains(log, "is not one the service accepts") ||
			!strings.Contains(log, "check cert, key and cacert in --cloud-config") {
			return fmt.Errorf("log lacks %q:\n%s", want, p.LogTail(2000))
		}
		return nil
	})
	if n := svc.Calls("NodeGroups"); n != 0 {
		t.Errorf("the service answered NodeGroups %d times to a client it should refuse", n)
	}
	if n := len(e.groupNodes("egtls-gpu")); n != 0 {
		t.Errorf("group has %d nodes", n)
	}
}
